-- Queries the guard must not answer, each with the message the analyst gets.
--
-- A case starts with `-- expect: <fragment>`: a case-insensitive substring of the
-- message. Optional directives follow it:
--   -- error: QueryRejected | QueryRefused | AccessDenied   (default QueryRejected)
--   -- policy: students | castro | hospital | events         (default students)
--   -- analyst: NAME   who asks (default alice)
--   -- pad-to: N       pad the SQL with trailing spaces to N characters
-- The SQL is every following line up to the next `-- expect:` line. Lines starting
-- with `-- ##` are section headers and notes, never part of a case.
-- Read by tests/query/test_corpus.py.

-- ## output that is not an aggregate

-- expect: the output has no aggregate
SELECT major, GROUPING(major) FROM students GROUP BY major

-- expect: column 'major' must appear in GROUP BY
SELECT major FROM students GROUP BY sex

-- expect: column 'sex' must appear in GROUP BY or inside an aggregate
SELECT sex FROM students

-- expect: SELECT * is not allowed
SELECT * FROM students

-- expect: SELECT * is not allowed
SELECT students.*, COUNT(*) FROM students

-- expect: SELECT * is not allowed
FROM students

-- expect: non-aggregate output sex || major is not allowed
SELECT sex || major, COUNT(*) FROM students GROUP BY ALL

-- expect: function GETENV('HOME') is not allowed
SELECT COUNT(*), getenv('HOME') FROM students

-- ## identifier columns, anywhere

-- expect: column 'name' identifies respondents and cannot be used anywhere in a query (the output included)
SELECT name FROM students

-- expect: column 'name' identifies respondents
SELECT name, COUNT(*) FROM students GROUP BY name

-- expect: identifies respondents and cannot be used anywhere in a query (WHERE included)
SELECT COUNT(*) FROM students WHERE name = 'Baker'

-- expect: identifies respondents and cannot be used anywhere in a query (WHERE included)
SELECT COUNT(*) FROM students WHERE name IS NULL

-- expect: identifies respondents and cannot be used anywhere in a query (GROUP BY included)
SELECT COUNT(*) FROM students GROUP BY name

-- expect: identifies respondents and cannot be used anywhere in a query (ORDER BY included)
SELECT sex, COUNT(*) FROM students GROUP BY sex ORDER BY name

-- expect: identifies respondents and cannot be used anywhere in a query (an aggregate included)
SELECT COUNT(name) FROM students

-- expect: column 'name' identifies respondents
SELECT COUNT("NAME") FROM students

-- expect: column 'name' identifies respondents
SELECT COUNT(s.name) FROM students AS s

-- expect: column 'name' identifies respondents
SELECT SUM(name) FROM students

-- expect: column 'patient_id' identifies respondents
-- policy: hospital
SELECT COUNT(*) FROM hospital WHERE patient_id = 'H0001'

-- expect: column 'person_id' identifies respondents
-- policy: castro
SELECT municipality, COUNT(person_id) FROM castro GROUP BY municipality

-- ## undeclared tables and columns

-- expect: unknown table 'student' (did you mean 'students'?)
SELECT COUNT(*) FROM student

-- expect: unknown table 'employees': the tables you may query are students
SELECT COUNT(*) FROM employees

-- expect: unknown column 'majr' in table students (did you mean 'major'?)
SELECT COUNT(majr) FROM students

-- expect: unknown column 'clas' in table students (did you mean 'class'?)
SELECT COUNT(*) FROM students WHERE clas = 1980

-- expect: unknown column 'rowid' in table students
SELECT COUNT(*) FROM students WHERE rowid = 1

-- expect: unknown column '_uid' in table students: the columns you may use are sex, major, class, income
SELECT COUNT(*) FROM students WHERE _uid = 1

-- expect: SELECT * is not allowed
SELECT COUNT(students.*) FROM students

-- expect: unknown column 'incomes' in table hospital (did you mean 'income'?)
-- policy: hospital
SELECT AVG(incomes) FROM hospital

-- expect: unknown table qualifier 'x' in x.major
SELECT COUNT(x.major) FROM students AS s

-- expect: main.students.class: the only schema is public in database statguard; write students.class
SELECT COUNT(*) FROM students WHERE main.students.class = 1980

-- expect: unknown table qualifier 's' in public.s.income: only students is queried; write s.income
SELECT SUM(public.s.income) FROM students AS s

-- expect: public.students.income: the only schema is public in database statguard
SELECT SUM(other.public.students.income) FROM students

-- ## schemas and databases other than statguard.public

-- expect: schema main is not available: the tables you may query are in schema public; write FROM students, FROM public.students or FROM statguard.public.students
SELECT COUNT(*) FROM main.students

-- expect: schema other is not available
SELECT COUNT(*) FROM other.students

-- expect: schema "PUBLIC" is not available
SELECT COUNT(*) FROM "PUBLIC".students

-- expect: database other is not available: the only database is statguard; write FROM students
SELECT COUNT(*) FROM other.public.students

-- expect: database memory is not available
SELECT COUNT(*) FROM memory.main.students

-- expect: system catalogs are not available: the tables you may query are students
SELECT COUNT(*) FROM pg_catalog.students

-- expect: system catalogs are not available
SELECT COUNT(*) FROM statguard.information_schema.students

-- expect: column aliases on the table (AS t(a, b, ...)) are not allowed
SELECT COUNT(*) FROM students AS t(sex, name) GROUP BY sex

-- expect: is not allowed: name the table, optionally with an alias, and nothing else
SELECT COUNT(*) FROM students AT (VERSION => 1)

-- ## files and table functions

-- expect: table functions such as read_csv(...) are not allowed
SELECT COUNT(*) FROM read_csv('examples/students/students.csv')

-- expect: table functions such as read_csv(...) are not allowed
SELECT COUNT(*) FROM read_parquet('students.parquet')

-- expect: table functions such as read_csv(...) are not allowed
SELECT COUNT(*) FROM read_json('students.json')

-- expect: table functions such as read_csv(...) are not allowed
SELECT COUNT(*) FROM glob('*')

-- expect: reading files ('file.parquet') is not allowed
SELECT COUNT(*) FROM 'file.parquet'

-- expect: reading files ('/etc/passwd') is not allowed
SELECT COUNT(*) FROM '/etc/passwd'

-- expect: reading files ('https://example.org/a.csv') is not allowed
SELECT COUNT(*) FROM "https://example.org/a.csv"

-- expect: reading files ('data/*.csv') is not allowed
SELECT COUNT(*) FROM 'data/*.csv'

-- ## statements other than SELECT

-- expect: ATTACH is not allowed: only the tables declared in the policy can be queried
ATTACH 'other.db' AS other

-- expect: DETACH is not allowed
DETACH other

-- expect: USE is not allowed
USE memory

-- expect: COPY is not allowed: the guard never reads or writes files
COPY students TO 'students.csv'

-- expect: COPY is not allowed
COPY students FROM '/tmp/students.csv'

-- ## sqlglot cannot parse DuckDB's EXPORT/IMPORT DATABASE; rejected before validation.
-- expect: cannot parse the query
EXPORT DATABASE 'dump'

-- expect: PRAGMA is not allowed
PRAGMA database_list

-- expect: SET is not allowed
SET enable_external_access = true

-- expect: SET is not allowed
SET VARIABLE x = 1

-- expect: RESET is not allowed
RESET enable_external_access

-- expect: INSTALL is not allowed
INSTALL httpfs

-- expect: INSTALL is not allowed
FORCE INSTALL httpfs

-- expect: LOAD is not allowed
LOAD httpfs

-- expect: CALL is not allowed
CALL pragma_version()

-- expect: CREATE TABLE is not allowed: the guard is read-only
CREATE TABLE copy AS SELECT * FROM students

-- expect: CREATE VIEW is not allowed: the guard is read-only
CREATE VIEW v AS SELECT * FROM students

-- expect: CREATE MACRO is not allowed
CREATE MACRO twice(x) AS x * 2

-- expect: DROP TABLE is not allowed: the guard is read-only
DROP TABLE students

-- expect: ALTER TABLE is not allowed: the guard is read-only
ALTER TABLE students ADD COLUMN note VARCHAR

-- expect: TRUNCATE is not allowed: the guard is read-only
TRUNCATE students

-- expect: INSERT is not allowed: the guard is read-only
INSERT INTO students VALUES ('Zed', 'Male', 'EE', 1980, 1)

-- expect: UPDATE is not allowed: the guard is read-only
UPDATE students SET income = 0

-- expect: DELETE is not allowed: the guard is read-only
DELETE FROM students WHERE name = 'Baker'

-- expect: DESCRIBE is not allowed
DESCRIBE students

-- expect: SHOW is not allowed
SHOW TABLES

-- expect: SUMMARIZE is not allowed
SUMMARIZE students

-- expect: EXPLAIN is not allowed
EXPLAIN SELECT COUNT(*) FROM students

-- expect: BEGIN is not allowed
BEGIN TRANSACTION

-- expect: COMMIT is not allowed
COMMIT

-- expect: CHECKPOINT is not allowed
CHECKPOINT

-- expect: PREPARE is not allowed
PREPARE q AS SELECT COUNT(*) FROM students

-- expect: EXECUTE is not allowed
EXECUTE q

-- expect: DEALLOCATE is not allowed
DEALLOCATE q

-- expect: VALUES is not allowed
VALUES (1), (2)

-- expect: PIVOT is not allowed
PIVOT students ON major USING SUM(income)

-- ## one statement, one table

-- expect: multiple statements (2) are not allowed: send one SELECT at a time
SELECT COUNT(*) FROM students; SELECT COUNT(*) FROM students

-- expect: multiple statements (2) are not allowed
SELECT COUNT(*) FROM students;
DROP TABLE students;

-- expect: a FROM clause naming a protected table is required: the tables you may query are students
SELECT version()

-- expect: JOIN is not allowed: query one protected table at a time
SELECT COUNT(*) FROM students AS a JOIN students AS b ON a.major = b.major

-- expect: JOIN is not allowed
SELECT COUNT(*) FROM students AS a, students AS b WHERE a.class = b.class

-- expect: JOIN is not allowed
SELECT COUNT(*) FROM students NATURAL JOIN students

-- expect: JOIN is not allowed
SELECT COUNT(*) FROM students POSITIONAL JOIN students

-- expect: SELECT * is not allowed
SELECT COUNT(*) FROM (SELECT * FROM students)

-- expect: subqueries are not allowed
SELECT COUNT(*) FROM students WHERE major IN (SELECT major FROM students WHERE income > 60000)

-- expect: subqueries are not allowed
SELECT COUNT(*), (SELECT SUM(income) FROM students) FROM students

-- expect: subqueries are not allowed
SELECT COUNT(*) FROM students WHERE EXISTS (SELECT 1 FROM students WHERE name = 'Baker')

-- expect: subqueries are not allowed
SELECT COUNT(*) FROM students WHERE class = (SELECT 1980)

-- expect: SELECT * is not allowed
WITH t AS (SELECT * FROM students) SELECT COUNT(*) FROM t

-- expect: table functions such as read_csv(...) are not allowed
WITH students AS (SELECT * FROM read_csv('/etc/passwd')) SELECT COUNT(*) FROM students

-- expect: INTERSECT is not allowed
SELECT COUNT(*) FROM students INTERSECT SELECT COUNT(*) FROM students

-- expect: EXCEPT is not allowed
SELECT COUNT(*) FROM students EXCEPT SELECT COUNT(*) FROM students

-- expect: VALUES lists are not allowed
SELECT COUNT(*) FROM (VALUES (1), (2)) AS t(x)

-- expect: PIVOT/UNPIVOT is not allowed
SELECT COUNT(*) FROM students PIVOT (SUM(income) FOR major IN ('EE', 'CS'))

-- expect: UNNEST is not allowed
SELECT COUNT(*) FROM unnest([1, 2, 3])

-- expect: JOIN is not allowed
SELECT COUNT(*) FROM students, LATERAL (SELECT 1)

-- expect: SELECT ... INTO is not allowed
SELECT COUNT(*) INTO copy FROM students

-- expect: FOR UPDATE / FOR SHARE is not allowed
SELECT COUNT(*) FROM students FOR UPDATE

-- ## system catalogs

-- expect: system catalogs are not available: the tables you may query are students
SELECT COUNT(*) FROM information_schema.tables

-- expect: system catalogs are not available
SELECT COUNT(*) FROM "information_schema"."columns"

-- expect: system catalogs are not available
SELECT COUNT(*) FROM pg_catalog.pg_class

-- expect: system catalogs are not available
SELECT COUNT(*) FROM sqlite_master

-- expect: system catalogs are not available
SELECT COUNT(*) FROM duckdb_columns

-- expect: table functions such as read_csv(...) are not allowed
SELECT COUNT(*) FROM duckdb_tables()

-- expect: table functions such as read_csv(...) are not allowed
SELECT COUNT(*) FROM duckdb_settings()

-- expect: table functions such as read_csv(...) are not allowed
SELECT COUNT(*) FROM pragma_table_info('students')

-- ## WHERE: comparisons of a bare dimension with constants (OR across columns only where audited)

-- expect: OR across columns, and NOT of a combined condition or a range, are allowed only where answers are audited
-- policy: unaudited
SELECT COUNT(*) FROM students WHERE major = 'EE' OR sex = 'Male'

-- expect: OR across columns, and NOT of a combined condition or a range, are allowed only where answers are audited
-- policy: unaudited
SELECT COUNT(*) FROM students WHERE class < 1979 OR class > 1981

-- expect: OR across columns, and NOT of a combined condition or a range, are allowed only where answers are audited
-- policy: unaudited
SELECT COUNT(*) FROM students WHERE class NOT BETWEEN 1978 AND 1979

-- expect: OR across columns, and NOT of a combined condition or a range, are allowed only where answers are audited
-- policy: unaudited
SELECT COUNT(*) FROM students WHERE NOT (major = 'EE' AND sex = 'Male')

-- expect: OR across columns, and NOT of a combined condition or a range, are allowed only where answers are audited
-- policy: unaudited
SELECT major, SUM(income) FROM students WHERE (major = 'EE' AND sex = 'Male') OR class = 1980 GROUP BY major

-- expect: the WHERE condition is too complex
SELECT COUNT(*) FROM students WHERE (major = 'EE' AND sex = 'Male' AND class = 1978) OR (major = 'CS' AND sex = 'Female' AND class = 1979) OR (major = 'ME' AND sex = 'Male' AND class = 1980) OR (major = 'EE' AND sex = 'Female' AND class = 1981)

-- expect: pattern matching (LIKE, GLOB, regular expressions) is not allowed in WHERE
SELECT COUNT(*) FROM students WHERE major LIKE 'E%'

-- expect: pattern matching
SELECT COUNT(*) FROM students WHERE major ILIKE 'e%'

-- expect: pattern matching
SELECT COUNT(*) FROM students WHERE major GLOB 'E*'

-- expect: pattern matching
SELECT COUNT(*) FROM students WHERE major SIMILAR TO 'E.*'

-- expect: pattern matching
SELECT COUNT(*) FROM students WHERE regexp_matches(major, '^E')

-- expect: pattern matching
SELECT COUNT(*) FROM students WHERE major ~ 'E'

-- expect: functions and arithmetic on columns are not allowed in WHERE (class % 2)
SELECT COUNT(*) FROM students WHERE class % 2 = 0

-- expect: functions and arithmetic on columns are not allowed in WHERE (LOWER(major))
SELECT COUNT(*) FROM students WHERE lower(major) = 'ee'

-- expect: functions and arithmetic on columns are not allowed in WHERE (HASH(major) % 2)
SELECT COUNT(*) FROM students WHERE hash(major) % 2 = 0

-- expect: functions and arithmetic on columns are not allowed in WHERE (CAST(class AS TEXT))
SELECT COUNT(*) FROM students WHERE CAST(class AS VARCHAR) = '1980'

-- expect: functions and arithmetic on columns are not allowed in WHERE (class + 0)
SELECT COUNT(*) FROM students WHERE class + 0 = 1980

-- expect: functions and arithmetic on columns are not allowed in WHERE (-class)
SELECT COUNT(*) FROM students WHERE -class = -1980

-- expect: functions and arithmetic on columns are not allowed in WHERE (LENGTH(major))
SELECT COUNT(*) FROM students WHERE length(major) = 2

-- expect: sex = major: compare a column with a constant, not with another column
SELECT COUNT(*) FROM students WHERE sex = major

-- expect: compare a column with a constant, not with another column
SELECT COUNT(*) FROM students WHERE class > class - 1

-- expect: 1 = 1: a condition must compare a dimension column with a constant
SELECT COUNT(*) FROM students WHERE 1 = 1

-- expect: constant conditions are not allowed in WHERE
SELECT COUNT(*) FROM students WHERE true

-- expect: WHERE major: write the condition out
SELECT COUNT(*) FROM students WHERE major

-- expect: only IS NULL and IS NOT NULL are allowed with IS
SELECT COUNT(*) FROM students WHERE major IS TRUE

-- expect: WHERE class IS DISTINCT FROM 1979 is not allowed: use comparisons
SELECT COUNT(*) FROM students WHERE class IS DISTINCT FROM 1979

-- expect: class IN (): list at least one value
SELECT COUNT(*) FROM students WHERE class IN ()

-- expect: 1979 + 1 is not a plain constant
SELECT COUNT(*) FROM students WHERE class = 1979 + 1

-- expect: CAST('1980' AS INT) is not a plain constant
SELECT COUNT(*) FROM students WHERE class = CAST('1980' AS INTEGER)

-- expect: CURRENT_SETTING('x') is not a plain constant
SELECT COUNT(*) FROM students WHERE major = current_setting('x')

-- expect: ANY(['EE']) is not a plain constant
SELECT COUNT(*) FROM students WHERE major = ANY(['EE'])

-- expect: is not a plain constant
SELECT COUNT(*) FROM students WHERE class IN (1978, class)

-- expect: measure 'income' cannot be used in WHERE: it may only appear inside COUNT, SUM or AVG
SELECT COUNT(*) FROM students WHERE income > 60000

-- expect: measure 'income' cannot be used in WHERE
SELECT COUNT(*) FROM students WHERE income BETWEEN 49000 AND 51000

-- expect: measure 'salary' cannot be used in WHERE
-- policy: castro
SELECT COUNT(*) FROM castro WHERE salary > 300

-- ## constants of the wrong type, NULL, parameters

-- expect: column 'class' is numeric (BIGINT); compare it with a number, not '1980'
SELECT COUNT(*) FROM students WHERE class = '1980'

-- expect: column 'class' is numeric
SELECT COUNT(*) FROM students WHERE class = true

-- expect: column 'major' is text (VARCHAR); compare it with a quoted string, e.g. '1'
SELECT COUNT(*) FROM students WHERE major = 1

-- expect: column 'day' is a DATE; compare it with a date
-- policy: events
SELECT COUNT(*) FROM events WHERE day = 20240110

-- expect: '2024-13-01' is not a valid date for column 'day': use ISO format
-- policy: events
SELECT COUNT(*) FROM events WHERE day = '2024-13-01'

-- expect: column 'member' is BOOLEAN; compare it with true or false
-- policy: events
SELECT COUNT(*) FROM events WHERE member = 'yes'

-- expect: time zone offsets are not supported
-- policy: events
SELECT COUNT(*) FROM events WHERE seen_at < '2024-02-01 00:00:00+02'

-- expect: is out of range: compare with a smaller number
SELECT COUNT(*) FROM students WHERE class = 1.5e400

-- expect: is out of range
SELECT COUNT(*) FROM students WHERE class < 1000000000000000000000000000000000000000000000

-- expect: comparisons with NULL are never true: use IS NULL or IS NOT NULL
SELECT COUNT(*) FROM students WHERE major = NULL

-- expect: comparisons with NULL are never true
SELECT COUNT(*) FROM students WHERE class <> NULL

-- expect: query parameters must be bound to values
SELECT COUNT(*) FROM students WHERE major = $1

-- expect: query parameters must be bound to values
SELECT COUNT(*) FROM students WHERE major = ?

-- expect: named placeholder :year is not allowed
SELECT COUNT(*) FROM students WHERE class = :year

-- ## measures and aggregates

-- expect: measure 'income' cannot be output row by row: aggregate it, e.g. SUM(income) or AVG(income)
SELECT income FROM students

-- expect: measure 'income' cannot be listed
SELECT major, income FROM students GROUP BY major

-- expect: measure 'income' cannot be used in GROUP BY
SELECT COUNT(*) FROM students GROUP BY income

-- expect: MIN and MAX are not allowed: each is one respondent's value
SELECT MIN(income) FROM students

-- expect: MIN and MAX are not allowed
SELECT major, MAX(income) FROM students GROUP BY major

-- expect: aggregate MEDIAN is not allowed; the guard answers COUNT, SUM and AVG
SELECT MEDIAN(income) FROM students

-- expect: aggregate STDDEV is not allowed
SELECT STDDEV(income) FROM students

-- expect: aggregate PERCENTILE_CONT is not allowed
SELECT quantile_cont(income, 0.5) FROM students

-- expect: aggregate ARG_MAX is not allowed
SELECT arg_max(major, income) FROM students

-- expect: aggregate ARRAY_AGG is not allowed
SELECT list(income) FROM students

-- expect: COUNT(DISTINCT ...) is not allowed
SELECT COUNT(DISTINCT major) FROM students

-- expect: AVG(DISTINCT ...) is not allowed
SELECT AVG(DISTINCT income) FROM students

-- expect: SUM needs a measure column; 'class' is a dimension (measures: income)
SELECT SUM(class) FROM students

-- expect: AVG needs a measure column; 'town' is a dimension
-- policy: hospital
SELECT AVG(town) FROM hospital

-- expect: aggregate arguments must be one bare column: write SUM(column), not SUM(income + 0)
SELECT SUM(income + 0) FROM students

-- expect: aggregate arguments must be one bare column
SELECT SUM(CASE WHEN name = 'Baker' THEN income END) FROM students

-- expect: aggregate arguments must be one bare column
SELECT COUNT(1) FROM students

-- expect: IGNORE/RESPECT NULLS is not allowed
SELECT SUM(income IGNORE NULLS) FROM students

-- expect: aggregate FILTER clauses are not allowed: filter rows in WHERE
SELECT COUNT(*) FILTER (WHERE major = 'EE') FROM students

-- expect: window functions (OVER ...) are not allowed: use GROUP BY
SELECT COUNT(*) OVER () FROM students

-- expect: window functions (OVER ...) are not allowed
SELECT SUM(income) OVER (PARTITION BY major ORDER BY class) FROM students

-- ## clauses

-- expect: QUALIFY filters on window functions: filter on aggregates with HAVING
SELECT major, COUNT(*) FROM students GROUP BY major QUALIFY COUNT(*) > 3

-- ## lists of values (SELECT DISTINCT d, or GROUP BY d without an aggregate)

-- expect: measure 'income' cannot be listed: its values are confidential
SELECT DISTINCT income FROM students

-- expect: measure 'income' cannot be listed
SELECT major, income FROM students GROUP BY major, income

-- expect: identifies respondents
SELECT DISTINCT name FROM students

-- expect: a list of values selects dimension columns only
SELECT DISTINCT lower(major) FROM students

-- expect: a list of values selects dimension columns only
SELECT 1 FROM students GROUP BY major

-- expect: SELECT DISTINCT ON (...) is not allowed
SELECT DISTINCT ON (major) major FROM students

-- expect: SELECT DISTINCT with GROUP BY is not allowed
SELECT DISTINCT major FROM students GROUP BY major

-- expect: ROLLUP, CUBE and GROUPING SETS are not allowed in a list of values
SELECT major FROM students GROUP BY ROLLUP (major)

-- expect: ORDER BY COUNT(*) is not allowed: order a list of values by its columns
SELECT major FROM students GROUP BY major ORDER BY COUNT(*)

-- expect: ORDER BY 2: there is no listed column at that position
SELECT DISTINCT major FROM students ORDER BY 2

-- expect: ORDER BY statguard_listed_rows is not allowed
SELECT DISTINCT major FROM students ORDER BY statguard_listed_rows

-- expect: ORDER BY sex: order by an output column
SELECT DISTINCT major FROM students ORDER BY sex

-- expect: measure 'income' cannot be used in WHERE
SELECT DISTINCT major FROM students WHERE income > 1000

-- ## ROLLUP, CUBE, GROUPING SETS and GROUPING() (the accepted forms are in accepted.sql)

-- expect: GROUP BY ... WITH ROLLUP / WITH CUBE is not supported: write GROUP BY ROLLUP (a, b)
SELECT major, sex, COUNT(*) FROM students GROUP BY major, sex WITH ROLLUP

-- expect: GROUP BY a, b GROUPING SETS (...) is not supported: write GROUP BY GROUPING SETS ((a, b), (a), ())
SELECT COUNT(*) FROM students GROUP BY major, sex GROUPING SETS ((major), (sex))

-- expect: GROUP BY LOWER(major) is not allowed: group by bare dimension columns
SELECT COUNT(*) FROM students GROUP BY ROLLUP (lower(major), sex)

-- expect: measure 'income' cannot be used in GROUP BY
SELECT major, COUNT(*) FROM students GROUP BY CUBE (major, income)

-- expect: column 'name' identifies respondents and cannot be used anywhere in a query (GROUP BY included)
SELECT COUNT(*) FROM students GROUP BY GROUPING SETS ((sex), (name))

-- expect: GROUP BY 3 refers to an aggregate: group by dimensions
SELECT major, sex, COUNT(*) FROM students GROUP BY ROLLUP (1, 3)

-- expect: GROUPING(major, sex): GROUPING takes exactly one grouping column (a bitmask over several keys is not supported): write one per key, GROUPING(major), GROUPING(sex)
SELECT major, sex, GROUPING(major, sex), COUNT(*) FROM students GROUP BY CUBE (major, sex)

-- expect: GROUPING_ID(major): GROUPING takes exactly one grouping column
SELECT major, GROUPING_ID(major), COUNT(*) FROM students GROUP BY ROLLUP (major)

-- expect: GROUPING(class): 'class' is not a grouping key (the keys are major); GROUPING takes one column of GROUP BY
SELECT major, GROUPING(class), COUNT(*) FROM students GROUP BY ROLLUP (major)

-- expect: GROUPING(major): 'major' is not a grouping key (the query has no GROUP BY)
SELECT GROUPING(major), COUNT(*) FROM students

-- expect: measure 'income' cannot be used in GROUPING()
SELECT major, GROUPING(income), COUNT(*) FROM students GROUP BY ROLLUP (major)

-- expect: column 'name' identifies respondents and cannot be used anywhere in a query (GROUPING() included)
SELECT major, GROUPING(name), COUNT(*) FROM students GROUP BY ROLLUP (major)

-- expect: GROUPING(1): GROUPING takes one bare grouping column, e.g. GROUPING(column)
SELECT major, GROUPING(1), COUNT(*) FROM students GROUP BY ROLLUP (major)

-- expect: GROUP BY 2 refers to grouping(major), which is not a column: group by dimensions
SELECT major, GROUPING(major), COUNT(*) FROM students GROUP BY ROLLUP (major, 2)

-- expect: GROUP BY g refers to grouping(major), which is not a column
SELECT major, GROUPING(major) AS g, COUNT(*) FROM students GROUP BY ROLLUP (major, g)

-- expect: ORDER BY GROUPING(sex): order by an output column
SELECT major, GROUPING(major), COUNT(*) FROM students GROUP BY ROLLUP (major) ORDER BY GROUPING(sex)

-- expect: GROUP BY LOWER(major) is not allowed: group by bare dimension columns
SELECT COUNT(*) FROM students GROUP BY lower(major)

-- expect: GROUP BY class % 2 is not allowed
SELECT major, COUNT(*) FROM students GROUP BY major, class % 2

-- expect: GROUP BY 3: there is no output column at that position
SELECT major, COUNT(*) FROM students GROUP BY 3

-- expect: GROUP BY 2 refers to an aggregate
SELECT major, COUNT(*) FROM students GROUP BY 2

-- expect: GROUP BY n refers to an aggregate (count(*))
SELECT COUNT(*) AS n FROM students GROUP BY n

-- expect: ORDER BY income: order by an output column
SELECT major, COUNT(*) FROM students GROUP BY major ORDER BY income

-- expect: ORDER BY SUM(income): order by an output column
SELECT major, COUNT(*) FROM students GROUP BY major ORDER BY SUM(income)

-- expect: ORDER BY RANDOM(): order by an output column
SELECT major, COUNT(*) FROM students GROUP BY major ORDER BY random()

-- expect: ORDER BY 3: order by an output column
SELECT major, COUNT(*) FROM students GROUP BY major ORDER BY 3

-- expect: LIMIT 1 + 1: use a whole number
SELECT COUNT(*) FROM students LIMIT 1 + 1

-- expect: LIMIT -1: use a whole number
SELECT COUNT(*) FROM students LIMIT -1

-- expect: LIMIT ALL: use a whole number
SELECT COUNT(*) FROM students LIMIT ALL

-- expect: OFFSET 'a': use a whole number
SELECT COUNT(*) FROM students OFFSET 'a'

-- expect: PERCENT and WITH TIES are not allowed
SELECT COUNT(*) FROM students LIMIT 50%

-- expect: PERCENT and WITH TIES are not allowed
SELECT major, COUNT(*) FROM students GROUP BY major FETCH FIRST 1 ROWS WITH TIES

-- expect: subqueries are not allowed
SELECT COUNT(*) FROM students LIMIT (SELECT 1)

-- expect: sampling (USING SAMPLE / TABLESAMPLE) is not allowed
SELECT COUNT(*) FROM students USING SAMPLE 5

-- expect: sampling (USING SAMPLE / TABLESAMPLE) is not allowed
SELECT AVG(income) FROM students TABLESAMPLE 50%

-- ## malformed input

-- expect: empty query: send one SELECT statement

-- expect: empty query
-- nothing but a comment

-- expect: query is 20001 characters long; the limit is 20000
-- pad-to: 20001
SELECT COUNT(*) FROM students

-- expect: cannot parse the query
SELECT COUNT(* FROM students

-- expect: cannot parse the query
SELEC COUNT(*) FROM students

-- ## who may ask

-- expect: unknown analyst 'mallory'
-- error: AccessDenied
-- analyst: mallory
SELECT COUNT(*) FROM students

-- ## allowed shapes the controls refuse (decided on public dimension values only)

-- ## One student (Baker) is a female EE.
-- expect: the query set covers fewer than k=3 respondents
-- error: QueryRefused
SELECT COUNT(*) FROM students WHERE major = 'EE' AND sex = 'Female'

-- expect: the query set covers fewer than k=3 respondents
-- error: QueryRefused
SELECT SUM(income) FROM students WHERE major = 'EE' AND sex = 'Female'

-- expect: the query set covers fewer than k=3 respondents
-- error: QueryRefused
SELECT AVG(income) FROM students WHERE 1979 = class

-- ## Eight of nine students are not of class 1979: the complement isolates Iles.
-- expect: leaves fewer than k=3 respondents outside it
-- error: QueryRefused
SELECT COUNT(*) FROM students WHERE class <> 1979

-- expect: leaves fewer than k=3 respondents outside it
-- error: QueryRefused
SELECT SUM(income) FROM students WHERE class IN (1978, 1980, 1981)

-- ## Seven of nine: two outside, still fewer than k=3.
-- expect: leaves fewer than k=3 respondents outside it
-- error: QueryRefused
SELECT AVG(income) FROM students WHERE class >= 1978 AND major IN ('CS', 'EE') AND class <> 1981

-- expect: the query set covers fewer than k=3 respondents
-- error: QueryRefused
-- policy: castro
SELECT SUM(salary) FROM castro WHERE municipality = 'M2' AND profession = 'P3'
