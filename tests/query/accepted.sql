-- Queries the guard must answer (some cells may still come back suppressed).
--
-- A case starts with `-- case:` (free text, may be empty). Optional directives follow:
--   -- rows: N     the answer has N rows
--   -- policy: students | castro | hospital | events | unaudited   (default students)
-- The SQL is every following line up to the next `-- case:` line. Lines starting
-- with `-- ##` are section headers and notes, never part of a case.
-- Read by tests/query/test_corpus.py.

-- ## plain aggregates

-- case:
-- rows: 1
SELECT COUNT(*) FROM students

-- case: several aggregates, one of them repeated
-- rows: 1
SELECT COUNT(*), COUNT(income), SUM(income), AVG(income), SUM(income) FROM students

-- case: COUNT of a dimension column
-- rows: 1
SELECT COUNT(major) FROM students

-- case: parenthesized aggregates and arguments
-- rows: 1
SELECT (COUNT(*)) AS n, (SUM((income))) FROM students

-- case: COUNT(ALL col) is COUNT(col)
-- rows: 1
SELECT COUNT(ALL income) FROM students

-- case: DuckDB's FROM-first syntax
-- rows: 1
FROM students SELECT COUNT(*)

-- case: trailing semicolon
-- rows: 1
SELECT COUNT(*) FROM students;

-- ## aliases, qualified and quoted names, case

-- case: output aliases
-- rows: 2
SELECT sex AS gender, COUNT(*) AS n, AVG(income) AS mean_income FROM students GROUP BY gender

-- case: qualified by the table name
-- rows: 2
SELECT students.major, SUM(students.income) FROM students GROUP BY students.major

-- case: qualified by a table alias
-- rows: 2
SELECT s.major, COUNT(*) FROM students AS s WHERE s.class >= 1979 GROUP BY s.major

-- case: alias without AS
-- rows: 2
SELECT s.sex, COUNT(*) FROM students s GROUP BY s.sex

-- case: quoted identifiers
-- rows: 2
SELECT "major", COUNT("income") AS "Number of incomes" FROM "students" GROUP BY "major"

-- case: mixed-case keywords and names
-- rows: 2
sElEcT MAJOR, Count(*), aVg(Income) FrOm Students gRoUp By Major

-- case: comments in SQL
-- rows: 2
SELECT major, -- the grouping key
       COUNT(*) /* how many */
FROM students
-- no WHERE on purpose
GROUP BY major

-- ## WHERE

-- case: equality
-- rows: 1
SELECT COUNT(*), SUM(income) FROM students WHERE major = 'CS'

-- case: reversed comparison
-- rows: 1
SELECT COUNT(*) FROM students WHERE 'EE' = major

-- case: reversed range comparison
-- rows: 1
SELECT COUNT(*) FROM students WHERE 1979 <= class

-- case: IN list
-- rows: 1
SELECT AVG(income) FROM students WHERE class IN (1978, 1980)

-- case: IN list with a single value
-- rows: 2
SELECT sex, COUNT(*) FROM students WHERE major IN ('CS') GROUP BY sex

-- case: BETWEEN
-- rows: 1
SELECT COUNT(*) FROM students WHERE class BETWEEN 1979 AND 1981

-- case: BETWEEN SYMMETRIC with the bounds reversed
-- rows: 1
SELECT COUNT(*) FROM students WHERE class BETWEEN SYMMETRIC 1981 AND 1979

-- case: IS NOT NULL
-- rows: 1
SELECT COUNT(*) FROM students WHERE major IS NOT NULL

-- case: NOT ... IS NULL reads as IS NOT NULL
-- rows: 1
SELECT COUNT(*) FROM students WHERE NOT major IS NULL

-- case: OR between alternatives on one column reads as IN
-- rows: 1
SELECT COUNT(*) FROM students WHERE major = 'EE' OR major = 'CS'

-- case: OR inside AND, on one column
-- rows: 1
SELECT COUNT(*) FROM students WHERE (sex = 'Male' OR sex = 'Female') AND major IN ('EE', 'CS', 'ME')

-- case: NOT of an equality reads as <>
-- rows: 1
SELECT COUNT(*) FROM students WHERE NOT major = 'EE'

-- case: NOT IN reads as <> for each value
-- rows: 1
SELECT COUNT(*) FROM students WHERE major NOT IN ('ME')

-- case: NOT of a range reads as the opposite range
-- rows: 1
SELECT COUNT(*) FROM students WHERE NOT (class < 1980)

-- case: NOT of alternatives reads as <> each (De Morgan)
-- rows: 1
SELECT COUNT(*) FROM students WHERE NOT (major = 'ME' OR major = 'XX')

-- case: OR across columns, where the history audit is on
-- rows: 1
SELECT COUNT(*) FROM students WHERE major = 'EE' OR sex = 'Female'

-- case: NOT of a conjunction (De Morgan: an OR of <>), grouped
SELECT major, COUNT(*) FROM students WHERE NOT (major = 'ME' AND sex = 'Male') GROUP BY major

-- case: NOT BETWEEN reads as two ranges
-- rows: 1
SELECT COUNT(*) FROM students WHERE class NOT BETWEEN 1979 AND 1980

-- case: OR of conjunctions over three columns
-- rows: 1
SELECT COUNT(*) FROM students WHERE (major = 'EE' AND sex = 'Male') OR (major = 'CS' AND class >= 1980) OR major = 'ME'

-- case: IS NULL selects nobody; the grouped answer is empty
-- rows: 0
SELECT major, COUNT(*) FROM students WHERE sex IS NULL GROUP BY major

-- case: <>
-- rows: 1
SELECT COUNT(*) FROM students WHERE major <> 'EE'

-- case: < and >=
-- rows: 1
SELECT COUNT(*) FROM students WHERE class < 1981 AND class >= 1979

-- case: > and <= and = together
-- rows: 1
SELECT COUNT(*), AVG(income) FROM students WHERE class > 1977 AND class <= 1980 AND sex = 'Male'

-- case: decimal, exponent and negative numbers
-- rows: 1
SELECT COUNT(*) FROM students WHERE class > -1 AND class < 1.99e3 AND class <> 1979.5

-- case: parenthesized conditions
-- rows: 1
SELECT COUNT(*) FROM students WHERE ((sex = 'Male') AND (class > 1977))

-- case: dollar-quoted string
-- rows: 1
SELECT COUNT(*) FROM students WHERE major = $$CS$$

-- ## GROUP BY

-- case: GROUP BY ordinal
-- rows: 4
SELECT sex, major, COUNT(*) FROM students GROUP BY 1, 2

-- case: GROUP BY ALL
-- rows: 4
SELECT sex, major, SUM(income) FROM students GROUP BY ALL

-- case: grouping key not in the output
-- rows: 2
SELECT COUNT(*) FROM students GROUP BY major

-- case: grouping key repeated
-- rows: 2
SELECT major, COUNT(*) FROM students GROUP BY major, major

-- case: grouping on the integer dimension
-- rows: 4
SELECT class, COUNT(*) FROM students GROUP BY class

-- ## ROLLUP, CUBE, GROUPING SETS (totals in the same answer; rolled-up keys are NULL)

-- case: ROLLUP: detail cells, subtotals per major, grand total
-- rows: 7
SELECT major, sex, COUNT(*) FROM students GROUP BY ROLLUP (major, sex)

-- case: CUBE: every margin
-- rows: 9
SELECT major, sex, COUNT(*) FROM students GROUP BY CUBE (major, sex)

-- case: explicit GROUPING SETS, margins only
-- rows: 4
SELECT major, sex, COUNT(*) FROM students GROUP BY GROUPING SETS ((major), (sex))

-- case: GROUPING SETS with the grand total, bare keys and a nested ROLLUP
-- rows: 5
SELECT sex, major, COUNT(*) FROM students GROUP BY GROUPING SETS (sex, ROLLUP (major), ())

-- case: a plain key crossed with a ROLLUP
-- rows: 14
SELECT sex, major, class, COUNT(*) FROM students GROUP BY sex, ROLLUP (major, class)

-- case: ROLLUP over a composite item
-- rows: 11
SELECT sex, major, class, SUM(income) FROM students GROUP BY ROLLUP (sex, (major, class))

-- case: ordinals inside ROLLUP
-- rows: 7
SELECT sex, major, COUNT(*) FROM students GROUP BY ROLLUP (1, 2)

-- case: output aliases inside CUBE
-- rows: 9
SELECT sex AS s, major AS m, COUNT(*) FROM students GROUP BY CUBE (s, m)

-- case: one grouping set is a plain GROUP BY
-- rows: 4
SELECT major, sex, COUNT(*) FROM students GROUP BY GROUPING SETS ((major, sex))

-- case: GROUP BY () is the grand total
-- rows: 1
SELECT COUNT(*) FROM students GROUP BY ()

-- case: ROLLUP with SUM, AVG and ORDER BY an aggregate
-- rows: 3
SELECT major, SUM(income), AVG(income) FROM students GROUP BY ROLLUP (major) ORDER BY 2 DESC

-- case: ROLLUP with WHERE and LIMIT
-- rows: 2
SELECT class, COUNT(*) FROM students WHERE sex = 'Male' GROUP BY ROLLUP (class) ORDER BY class LIMIT 2

-- case: GROUPING() tells a total from a NULL key; ORDER BY its alias and position
-- rows: 7
SELECT major, sex, GROUPING(major) AS total_major, GROUPING(sex), COUNT(*) FROM students GROUP BY ROLLUP (major, sex) ORDER BY total_major, 4

-- case: GROUPING() in a plain GROUP BY is always 0
-- rows: 2
SELECT major, GROUPING(major), COUNT(*) FROM students GROUP BY major

-- ## ORDER BY, LIMIT, OFFSET

-- case: ORDER BY alias
-- rows: 2
SELECT major AS m, COUNT(*) AS n FROM students GROUP BY m ORDER BY n

-- case: ORDER BY ordinal
-- rows: 4
SELECT class, COUNT(*) FROM students GROUP BY class ORDER BY 1 DESC

-- case: ORDER BY an aggregate expression of the output
-- rows: 2
SELECT major, AVG(income) FROM students GROUP BY major ORDER BY AVG(income) DESC

-- case: ORDER BY a column name, DESC NULLS FIRST
-- rows: 4
SELECT class, SUM(income) FROM students GROUP BY class ORDER BY class DESC NULLS FIRST

-- case: ORDER BY several keys, ASC NULLS LAST
-- rows: 4
SELECT sex, major, COUNT(*) FROM students GROUP BY sex, major ORDER BY sex ASC NULLS LAST, 2 DESC

-- case: LIMIT
-- rows: 2
SELECT class, COUNT(*) FROM students GROUP BY class ORDER BY class LIMIT 2

-- case: LIMIT and OFFSET
-- rows: 1
SELECT class, COUNT(*) FROM students GROUP BY class ORDER BY class LIMIT 1 OFFSET 3

-- case: OFFSET past the end
-- rows: 0
SELECT class, COUNT(*) FROM students GROUP BY class OFFSET 10

-- case: standard FETCH FIRST
-- rows: 1
SELECT major, COUNT(*) FROM students GROUP BY major ORDER BY major FETCH FIRST 1 ROWS ONLY

-- ## other tables

-- case: castro: the full P x M count table (sensitive cells come back suppressed)
-- policy: castro
-- rows: 15
SELECT municipality, profession, COUNT(*), SUM(salary) FROM castro GROUP BY ALL ORDER BY 1, 2

-- case: hospital: mean income per town
-- policy: hospital
-- rows: 6
SELECT town, AVG(income) FROM hospital GROUP BY town ORDER BY town

-- case: date compared with an ISO string
-- policy: events
-- rows: 1
SELECT COUNT(*) FROM events WHERE day >= '2024-02-01'

-- case: date and timestamp literals
-- policy: events
-- rows: 3
SELECT region, SUM(amount) FROM events WHERE day BETWEEN DATE '2024-01-01' AND DATE '2024-03-31' AND seen_at < TIMESTAMP '2025-01-01 00:00:00' GROUP BY region

-- case: boolean and double dimensions
-- policy: events
-- rows: 1
SELECT COUNT(*), AVG(amount) FROM events WHERE member = true AND rating >= 2.5

-- ## qualified and quoted names, as BI tools write them

-- case: the schema the endpoint advertises
-- rows: 2
SELECT major, COUNT(*) FROM public.students GROUP BY major

-- case: database and schema
-- rows: 1
SELECT COUNT(*) FROM statguard.public.students

-- case: quoted schema and table (Metabase, DBeaver)
-- rows: 2
SELECT "major", COUNT(*) FROM "public"."students" GROUP BY "major"

-- case: quoted table, database in any case when unquoted
-- rows: 1
SELECT SUM(income) FROM StatGuard.Public."students"

-- case: columns qualified by the table, its schema and its database
-- rows: 2
SELECT "public"."students"."major" AS "major", COUNT(*) AS "count" FROM "public"."students"
GROUP BY "public"."students"."major" ORDER BY "public"."students"."major" ASC

-- case: columns qualified by the table name or its alias
-- rows: 2
SELECT s.major, SUM(students.income) FROM public.students AS s WHERE statguard.public.students.class > 1900 GROUP BY s.major

-- ## lists of values: asked as COUNT(*) grouped by the columns; values whose count is withheld are left out

-- case: every major is held by at least k=3 students
-- rows: 2
SELECT DISTINCT major FROM students

-- case: GROUP BY without an aggregate lists values too
-- rows: 2
SELECT major FROM students GROUP BY major

-- case: classes 1979, 1980 and 1981 have fewer than k=3 students: only 1978 is listed
-- rows: 1
SELECT DISTINCT class FROM students

-- case: WHERE on dimensions, ORDER BY and LIMIT apply to the listed values
-- rows: 1
SELECT DISTINCT major AS m FROM students WHERE sex = 'Male' ORDER BY m DESC LIMIT 1

-- case: combinations of values
-- rows: 2
SELECT DISTINCT sex, major FROM students ORDER BY 1, 2

-- ## post-processing: computed on protected answers (guard/post; each inner query is protected alone)

-- case: UNION of two protected answers (each asked, protected and logged alone)
-- rows: 2
SELECT COUNT(*) FROM students WHERE sex = 'Male' UNION SELECT COUNT(*) FROM students WHERE major = 'EE'

-- case: UNION ALL of protected answers
-- rows: 2
SELECT COUNT(*) FROM students UNION ALL SELECT COUNT(*) FROM students

-- case: arithmetic on released aggregates
-- rows: 1
SELECT SUM(income) / COUNT(*) FROM students

-- case: arithmetic on one aggregate (asked once)
-- rows: 1
SELECT SUM(income) - SUM(income) FROM students

-- case: COALESCE of an aggregate (withheld stays withheld, not 0)
-- rows: 1
SELECT COALESCE(SUM(income), 0) FROM students

-- case: HAVING on a protected aggregate, asked as a hidden output
SELECT major, COUNT(*) FROM students GROUP BY major HAVING SUM(income) > 200000

-- case: DISTINCT over a protected answer
-- rows: 1
SELECT DISTINCT COUNT(*) FROM students

-- case: DISTINCT over a protected answer's rows
-- rows: 2
SELECT DISTINCT major, COUNT(*) FROM students GROUP BY major

-- case: arithmetic on GROUPING()
-- rows: 3
SELECT major, GROUPING(major) + 1, COUNT(*) FROM students GROUP BY ROLLUP (major)

-- case: a constant output beside aggregates (a label, as UNION branches have)
-- rows: 1
SELECT 1, COUNT(*) FROM students

-- case: a constant label
-- rows: 1
SELECT 'x' AS label, COUNT(*) FROM students

-- case: a total row labelled in a UNION ALL
-- rows: 3
SELECT major, COUNT(*) FROM students GROUP BY major UNION ALL SELECT 'all', COUNT(*) FROM students
