-- The statements analysts' tools send to connect, browse and query, as they send them
-- (their own SQL, parameters bound as literals), against the students policy. Each is
-- answered or refused with a clear SQLSTATE: never a dropped connection, never XX000.
--
-- A statement starts with `-- client: <tool> <step>`; the answer it gets follows:
--   -- answer: command         a session command (no rows)
--   -- answer: rows N          exactly N rows
--   -- answer: rows N+         at least N rows
--   -- answer: error SQLSTATE  refused with that code
-- The SQL is every following line up to the next `-- client:` line. Lines starting
-- with `-- ##` are notes. Read by tests/server/pgwire/test_client_statements.py.

-- ## psql: \dt, \d students (\x is the client's own); PostgreSQL 16's psql

-- client: psql browse
-- answer: rows 1
SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;

-- client: psql describe
-- answer: rows 1
SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^(students)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3;

-- client: psql describe
-- answer: rows 4
SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '16400' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;

-- client: psql query
-- answer: rows 2
SELECT major, COUNT(*) FROM students GROUP BY major;

-- ## pgjdbc 42.7: connect, DatabaseMetaData.getTables and getColumns, a query

-- client: pgjdbc connect
-- answer: command
SET extra_float_digits = 3

-- client: pgjdbc connect
-- answer: command
SET application_name = 'PostgreSQL JDBC Driver'

-- client: pgjdbc browse
-- answer: rows 1
SELECT current_database() AS "TABLE_CAT", n.nspname AS "TABLE_SCHEM", c.relname AS "TABLE_NAME",
 CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema' WHEN true THEN 'SYSTEM TABLE'
 WHEN false THEN CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'v' THEN 'VIEW' ELSE NULL END
 ELSE NULL END AS "TABLE_TYPE", d.description AS "REMARKS"
 FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_description d
  ON (c.oid = d.objoid AND d.objsubid = 0 and d.classoid = 'pg_class'::regclass)
 WHERE c.relnamespace = n.oid AND c.relname LIKE '%' AND (false OR ( c.relkind = 'r'
 AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' ) )
 ORDER BY "TABLE_TYPE","TABLE_SCHEM","TABLE_NAME"

-- client: pgjdbc browse
-- answer: rows 4
SELECT * FROM (SELECT current_database() AS current_database, n.nspname,c.relname,a.attname,
 a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,
 t.typtypmod, row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum,
 nullif(a.attidentity, '') as attidentity, nullif(a.attgenerated, '') as attgenerated,
 pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc, dsc.description,t.typbasetype,t.typtype
 FROM pg_catalog.pg_namespace n
 JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid) JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)
 JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)
 LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)
 LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)
 LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')
 LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')
 WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped AND c.relname LIKE 'students') c
 WHERE true AND attname LIKE '%' ORDER BY nspname,c.relname,attnum

-- client: pgjdbc query
-- answer: rows 2
SELECT major, COUNT(*) FROM students WHERE sex = 'Male' GROUP BY major

-- ## psycopg 3: what it asks on its own (TypeInfo.fetch, for SQLAlchemy's hstore probe)

-- client: psycopg connect
-- answer: rows 0
SELECT typname AS name, oid, typarray AS array_oid, oid::regtype::text AS regtype, typdelim AS delimiter
FROM pg_type t WHERE t.oid = to_regtype('hstore') ORDER BY t.oid

-- client: psycopg connect
-- answer: rows 1
select pg_catalog.version()

-- client: psycopg query
-- answer: rows 1
SELECT AVG(income) AS mean FROM students

-- ## DBeaver 25: connect and browse the navigator (the schema's and table's OIDs are the catalog's)

-- client: dbeaver connect
-- answer: command
SET extra_float_digits = 3

-- client: dbeaver connect
-- answer: command
SET application_name = 'PostgreSQL JDBC Driver'

-- client: dbeaver connect
-- answer: command
SET application_name = 'DBeaver 25.1.5 - Main <statguard>'

-- client: dbeaver connect
-- answer: rows 1
SELECT current_schema(),session_user

-- client: dbeaver connect
-- answer: rows 3
SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass ORDER BY nspname

-- client: dbeaver connect
-- answer: rows 0
SELECT n.nspname = ANY(current_schemas(true)), n.nspname, t.typname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid WHERE t.oid = 1034

-- client: dbeaver connect
-- answer: rows 0
SELECT typinput='pg_catalog.array_in'::regproc as is_array, typtype, typname, pg_type.oid   FROM pg_catalog.pg_type   LEFT JOIN (select ns.oid as nspoid, ns.nspname, r.r           from pg_namespace as ns           join ( select s.r, (current_schemas(false))[s.r] as nspname                    from generate_series(1, array_upper(current_schemas(false), 1)) as s(r) ) as r          using ( nspname )        ) as sp     ON sp.nspoid = typnamespace  WHERE pg_type.oid = 1034  ORDER BY sp.r, pg_type.oid DESC

-- client: dbeaver connect
-- answer: rows 1
SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname='statguard'

-- client: dbeaver connect
-- answer: rows 1
SELECT * FROM pg_catalog.pg_settings where name='standard_conforming_strings'

-- client: dbeaver connect
-- answer: rows 1
SELECT string_agg(word, ',' ) from pg_catalog.pg_get_keywords() where word <> ALL ('{a,abs,absolute,action,select}'::text[])

-- client: dbeaver browse
-- answer: rows 1
SELECT version()

-- client: dbeaver browse
-- answer: rows 0
SELECT * FROM pg_catalog.pg_enum WHERE 1<>1 LIMIT 1

-- client: dbeaver browse
-- answer: rows 0
SELECT reltype FROM pg_catalog.pg_class WHERE 1<>1 LIMIT 1

-- client: dbeaver browse
-- answer: rows 10+
SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as base_type_name, d.description FROM pg_catalog.pg_type t LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid WHERE t.typname IS NOT NULL AND (c.relkind IS NULL OR c.relkind = 'c') AND (et.typcategory IS NULL OR et.typcategory <> 'C')

-- client: dbeaver browse
-- answer: rows 1
SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as partition_expr,  pg_catalog.pg_get_partkeydef(c.oid) as partition_key FROM pg_catalog.pg_class c LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_class'::regclass WHERE c.relnamespace=2200 AND c.relkind not in ('i','I','c')

-- client: dbeaver browse
-- answer: rows 1
select c.oid,pg_catalog.pg_total_relation_size(c.oid) as total_rel_size,pg_catalog.pg_relation_size(c.oid) as rel_size FROM pg_class c WHERE c.relnamespace=2200

-- client: dbeaver browse
-- answer: rows 0
SELECT i.*,i.indkey as keys,c.relname,c.relnamespace,c.relam,c.reltablespace,tc.relname as tabrelname,dsc.description,pg_catalog.pg_get_expr(i.indpred, i.indrelid) as pred_expr,pg_catalog.pg_get_expr(i.indexprs, i.indrelid, true) as expr,pg_catalog.pg_relation_size(i.indexrelid) as index_rel_size,pg_catalog.pg_stat_get_numscans(i.indexrelid) as index_num_scans FROM pg_catalog.pg_index i INNER JOIN pg_catalog.pg_class c ON c.oid=i.indexrelid INNER JOIN pg_catalog.pg_class tc ON tc.oid=i.indrelid LEFT OUTER JOIN pg_catalog.pg_description dsc ON i.indexrelid=dsc.objoid WHERE  i.indrelid=16400 ORDER BY tabrelname, c.relname

-- client: dbeaver browse
-- answer: rows 0
SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description, case when c.contype='c' then "substring"(pg_get_constraintdef(c.oid), 7) else null end consrc_copy FROM pg_catalog.pg_constraint c INNER JOIN pg_catalog.pg_class t ON t.oid=c.conrelid LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_constraint'::regclass WHERE c.conrelid=16400 ORDER BY c.oid

-- client: dbeaver browse
-- answer: rows 4
SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,dsc.description,dep.objid FROM pg_catalog.pg_attribute a INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid) LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum) LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid) LEFT OUTER JOIN pg_depend dep on dep.refobjid = a.attrelid AND dep.deptype = 'i' and dep.refobjsubid = a.attnum and dep.classid = dep.refclassid WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c') AND c.oid=16400 ORDER BY a.attnum

-- client: dbeaver query
-- answer: rows 2
SELECT major, count(*) FROM public.students GROUP BY major

-- ## Metabase: sync (describe-database, table privileges, describe-fields, FKs, indexes), a question

-- client: metabase connect
-- answer: rows 1
show timezone;

-- client: metabase sync
-- answer: rows 1
SELECT "n"."nspname" AS "schema", "c"."relname" AS "name", CASE "c"."relkind" WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS "type", "d"."description" AS "description", "stat"."n_live_tup" AS "estimated_row_count" FROM "pg_catalog"."pg_class" AS "c" INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "c"."relnamespace" = "n"."oid" LEFT JOIN "pg_catalog"."pg_description" AS "d" ON ("c"."oid" = "d"."objoid") AND ("d"."objsubid" = 0) AND ("d"."classoid" = 'pg_class'::regclass) LEFT JOIN "pg_stat_user_tables" AS "stat" ON ("n"."nspname" = "stat"."schemaname") AND ("c"."relname" = "stat"."relname") WHERE ("c"."relnamespace" = "n"."oid") AND ("n"."nspname" !~ '^pg_') AND ("n"."nspname" <> 'information_schema') AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND ("n"."nspname" IN ('public')) ORDER BY "type" ASC, "schema" ASC, "name" ASC

-- client: metabase sync
-- answer: rows 1
with table_privileges as (
 select
   NULL as role,
   t.schemaname as schema,
   t.objectname as table,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'update') as update,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'select') as select,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'insert') as insert,
   pg_catalog.has_table_privilege(     current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'delete') as delete
 from (
   select schemaname, tablename as objectname from pg_catalog.pg_tables
   union
   select schemaname, viewname as objectname from pg_catalog.pg_views
   union
   select schemaname, matviewname as objectname from pg_catalog.pg_matviews
 ) t
 where t.schemaname !~ '^pg_'
   and t.schemaname <> 'information_schema'
   and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')
)
select t.*
from table_privileges t

-- client: metabase sync
-- answer: rows 4
SELECT "c"."column_name" AS "name", CASE WHEN "c"."udt_schema" IN ('public', 'pg_catalog') THEN FORMAT('%s', "c"."udt_name") ELSE FORMAT('"%s"."%s"', "c"."udt_schema", "c"."udt_name") END AS "database-type", "c"."ordinal_position" - 1 AS "database-position", "c"."table_schema" AS "table-schema", "c"."table_name" AS "table-name", "pk"."column_name" IS NOT NULL AS "pk?", COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST("c"."table_schema" AS TEXT), CAST("c"."table_name" AS TEXT)) AS REGCLASS) AS OID), "c"."ordinal_position") AS "field-comment", (("column_default" IS NULL) OR (LOWER("column_default") = 'null')) AND ("is_nullable" = 'NO') AND NOT ((("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO')) AS "database-required", (("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO') AS "database-is-auto-increment" FROM "information_schema"."columns" AS "c" LEFT JOIN (SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name" FROM "information_schema"."table_constraints" AS "tc" INNER JOIN "information_schema"."key_column_usage" AS "kc" ON ("tc"."constraint_name" = "kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema") AND ("tc"."table_name" = "kc"."table_name") WHERE "tc"."constraint_type" = 'PRIMARY KEY') AS "pk" ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = "pk"."table_name") AND ("c"."column_name" = "pk"."column_name") WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND ("c"."table_schema" IN ('public')) AND ("c"."table_name" IN ('students')) UNION ALL SELECT "pa"."attname" AS "name", CASE WHEN "ptn"."nspname" IN ('public', 'pg_catalog') THEN FORMAT('%s', "pt"."typname") ELSE FORMAT('"%s"."%s"', "ptn"."nspname", "pt"."typname") END AS "database-type", "pa"."attnum" - 1 AS "database-position", "pn"."nspname" AS "table-schema", "pc"."relname" AS "table-name", FALSE AS "pk?", NULL AS "field-comment", FALSE AS "database-required", FALSE AS "database-is-auto-increment" FROM "pg_catalog"."pg_class" AS "pc" INNER JOIN "pg_catalog"."pg_namespace" AS "pn" ON "pn"."oid" = "pc"."relnamespace" INNER JOIN "pg_catalog"."pg_attribute" AS "pa" ON "pa"."attrelid" = "pc"."oid" INNER JOIN "pg_catalog"."pg_type" AS "pt" ON "pt"."oid" = "pa"."atttypid" INNER JOIN "pg_catalog"."pg_namespace" AS "ptn" ON "ptn"."oid" = "pt"."typnamespace" WHERE ("pc"."relkind" = 'm') AND ("pa"."attnum" >= 1) AND ("pn"."nspname" IN ('public')) AND ("pc"."relname" IN ('students')) ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC

-- client: metabase sync
-- answer: rows 0
SELECT nspname, typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.oid IN (SELECT DISTINCT enumtypid FROM pg_enum e)

-- client: metabase sync
-- answer: rows 0
SELECT "fk_ns"."nspname" AS "fk-table-schema", "fk_table"."relname" AS "fk-table-name", "fk_column"."attname" AS "fk-column-name", "pk_ns"."nspname" AS "pk-table-schema", "pk_table"."relname" AS "pk-table-name", "pk_column"."attname" AS "pk-column-name" FROM "pg_constraint" AS "c" INNER JOIN "pg_class" AS "fk_table" ON "c"."conrelid" = "fk_table"."oid" INNER JOIN "pg_namespace" AS "fk_ns" ON "c"."connamespace" = "fk_ns"."oid" INNER JOIN "pg_attribute" AS "fk_column" ON "c"."conrelid" = "fk_column"."attrelid" INNER JOIN "pg_class" AS "pk_table" ON "c"."confrelid" = "pk_table"."oid" INNER JOIN "pg_namespace" AS "pk_ns" ON "pk_table"."relnamespace" = "pk_ns"."oid" INNER JOIN "pg_attribute" AS "pk_column" ON "c"."confrelid" = "pk_column"."attrelid" WHERE fk_ns.nspname !~ '^information_schema|catalog_history|pg_' AND ("c"."contype" = 'f'::char) AND ("fk_column"."attnum" = ANY(c.conkey)) AND ("pk_column"."attnum" = ANY(c.confkey)) AND ("fk_table"."relname" IN ('students')) AND ("fk_ns"."nspname" IN ('public')) ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC

-- client: metabase sync
-- answer: rows 0
SELECT "tmp"."table-schema", "tmp"."table-name", TRIM(BOTH '"' FROM PG_CATALOG.PG_GET_INDEXDEF("tmp"."ci_oid", "tmp"."pos", FALSE)) AS "field-name" FROM (SELECT "n"."nspname" AS "table-schema", "ct"."relname" AS "table-name", "ci"."oid" AS "ci_oid", (INFORMATION_SCHEMA._PG_EXPANDARRAY("i"."indkey")).n AS "pos" FROM "pg_catalog"."pg_class" AS "ct" INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "ct"."relnamespace" = "n"."oid" INNER JOIN "pg_catalog"."pg_index" AS "i" ON "ct"."oid" = "i"."indrelid" INNER JOIN "pg_catalog"."pg_class" AS "ci" ON "ci"."oid" = "i"."indexrelid" WHERE (PG_CATALOG.PG_GET_EXPR("i"."indpred", "i"."indrelid") IS NULL) AND n.nspname !~ '^information_schema|catalog_history|pg_' AND ("n"."nspname" IN ('public')) AND ("ct"."relname" IN ('students'))) AS "tmp" WHERE "tmp"."pos" = 1

-- client: metabase query
-- answer: rows 2
SELECT "public"."students"."major" AS "major", COUNT(*) AS "count" FROM "public"."students" GROUP BY "public"."students"."major" ORDER BY "public"."students"."major" ASC

-- ## Metabase's read-privilege probe reads no row: answered empty
-- client: metabase sync
-- answer: rows 0
SELECT TRUE AS "_" FROM "public"."students" WHERE 1 <> 1 LIMIT 0

-- ## Metabase's query builder wraps a native question in "source" (post-processing)
-- client: metabase query
-- answer: rows 2
SELECT "source"."major" AS "major", "source"."count" AS "count" FROM (SELECT major, COUNT(*) FROM students GROUP BY major) "source" LIMIT 1048575

-- client: metabase sync
-- answer: error 42000
SELECT "public"."students"."income" AS "income" FROM "public"."students" LIMIT 10000

-- ## Superset: prequery, catalogs, cancel key, cost estimate (the SQLAlchemy inspector's queries run in test_client_statements.py)

-- client: superset connect
-- answer: command
set search_path = "public"

-- client: superset connect
-- answer: rows 1
SELECT datname FROM pg_database
WHERE datistemplate = false;

-- client: superset connect
-- answer: rows 1
SELECT pg_backend_pid()

-- client: superset connect
-- answer: rows 0
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid='1'

-- client: superset query
-- answer: error 42000
EXPLAIN SELECT COUNT(*) FROM students

-- client: superset query
-- answer: rows 1
SELECT COUNT(*) AS count FROM "public"."students"

-- ## Superset charts on a SQL dataset wrap it as virtual_table (post-processing)
-- client: superset query
-- answer: rows 2
SELECT major AS major, sum AS sum FROM (SELECT major, SUM(income) FROM students GROUP BY major) AS virtual_table LIMIT 1000

-- client: superset query
-- answer: rows 1
SELECT ROUND(AVG(income), -3) AS "AVG(income)" FROM "public"."students" LIMIT 50000
