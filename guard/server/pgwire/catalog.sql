-- The emulated PostgreSQL 16 system catalog of one analyst's view of a policy.
--
-- Runs in a private in-memory DuckDB that holds no data: the schema "public" has one
-- EMPTY table per table the analyst may query (identifier columns left out), and the
-- relations below describe them. catalog.py fills pg_namespace, pg_class, pg_attribute,
-- pg_type, pg_description, pg_roles and pg_database from the policy; every other
-- relation stays empty because statguard has no such objects (indexes, constraints,
-- triggers, functions...). Columns follow PostgreSQL's, so drivers' queries bind.
-- Statements are separated by ";" at the end of a line.

CREATE SCHEMA pgcat;
CREATE SCHEMA infoschema;

CREATE TABLE pgcat.pg_namespace (oid BIGINT, nspname VARCHAR, nspowner BIGINT, nspacl VARCHAR[]);

CREATE TABLE pgcat.pg_class (
    oid BIGINT, relname VARCHAR, relnamespace BIGINT, reltype BIGINT DEFAULT 0, reloftype BIGINT DEFAULT 0,
    relowner BIGINT DEFAULT 10, relam BIGINT DEFAULT 2, relfilenode BIGINT DEFAULT 0,
    reltablespace BIGINT DEFAULT 0, relpages INTEGER DEFAULT 0, reltuples REAL DEFAULT -1,
    relallvisible INTEGER DEFAULT 0, reltoastrelid BIGINT DEFAULT 0, relhasindex BOOLEAN DEFAULT false,
    relisshared BOOLEAN DEFAULT false, relpersistence VARCHAR DEFAULT 'p', relkind VARCHAR DEFAULT 'r',
    relnatts SMALLINT, relchecks SMALLINT DEFAULT 0, relhasrules BOOLEAN DEFAULT false,
    relhastriggers BOOLEAN DEFAULT false, relhassubclass BOOLEAN DEFAULT false,
    relrowsecurity BOOLEAN DEFAULT false, relforcerowsecurity BOOLEAN DEFAULT false,
    relispopulated BOOLEAN DEFAULT true, relreplident VARCHAR DEFAULT 'd', relispartition BOOLEAN DEFAULT false,
    relrewrite BIGINT DEFAULT 0, relfrozenxid BIGINT DEFAULT 0, relminmxid BIGINT DEFAULT 0, relacl VARCHAR[],
    reloptions VARCHAR[], relpartbound VARCHAR, relhasoids BOOLEAN DEFAULT false
);

CREATE TABLE pgcat.pg_attribute (
    attrelid BIGINT, attname VARCHAR, atttypid BIGINT, attlen SMALLINT, attnum SMALLINT,
    attcacheoff INTEGER DEFAULT -1, atttypmod INTEGER DEFAULT -1, attndims SMALLINT DEFAULT 0, attbyval BOOLEAN,
    attalign VARCHAR DEFAULT 'i', attstorage VARCHAR, attcompression VARCHAR DEFAULT '',
    attnotnull BOOLEAN DEFAULT false, atthasdef BOOLEAN DEFAULT false, atthasmissing BOOLEAN DEFAULT false,
    attidentity VARCHAR DEFAULT '', attgenerated VARCHAR DEFAULT '', attisdropped BOOLEAN DEFAULT false,
    attislocal BOOLEAN DEFAULT true, attinhcount SMALLINT DEFAULT 0, attstattarget SMALLINT DEFAULT -1,
    attcollation BIGINT DEFAULT 0, attacl VARCHAR[], attoptions VARCHAR[], attfdwoptions VARCHAR[],
    attmissingval VARCHAR
);

CREATE TABLE pgcat.pg_type (
    oid BIGINT, typname VARCHAR, typnamespace BIGINT DEFAULT 11, typowner BIGINT DEFAULT 10, typlen SMALLINT,
    typbyval BOOLEAN, typtype VARCHAR DEFAULT 'b', typcategory VARCHAR, typispreferred BOOLEAN DEFAULT false,
    typisdefined BOOLEAN DEFAULT true, typdelim VARCHAR DEFAULT ',', typrelid BIGINT DEFAULT 0,
    typsubscript VARCHAR DEFAULT '-', typelem BIGINT DEFAULT 0, typarray BIGINT DEFAULT 0, typinput VARCHAR,
    typoutput VARCHAR, typreceive VARCHAR, typsend VARCHAR, typmodin VARCHAR DEFAULT '-',
    typmodout VARCHAR DEFAULT '-', typanalyze VARCHAR DEFAULT '-', typalign VARCHAR DEFAULT 'i',
    typstorage VARCHAR, typnotnull BOOLEAN DEFAULT false, typbasetype BIGINT DEFAULT 0,
    typtypmod INTEGER DEFAULT -1, typndims INTEGER DEFAULT 0, typcollation BIGINT DEFAULT 0,
    typdefaultbin VARCHAR, typdefault VARCHAR, typacl VARCHAR[],
    -- not PostgreSQL's: what format_type prints for this type
    format_name VARCHAR
);

CREATE TABLE pgcat.pg_description (objoid BIGINT, classoid BIGINT, objsubid INTEGER, description VARCHAR);
CREATE TABLE pgcat.pg_shdescription (objoid BIGINT, classoid BIGINT, description VARCHAR);

CREATE TABLE pgcat.pg_roles (
    oid BIGINT, rolname VARCHAR, rolsuper BOOLEAN DEFAULT false, rolinherit BOOLEAN DEFAULT true,
    rolcreaterole BOOLEAN DEFAULT false, rolcreatedb BOOLEAN DEFAULT false, rolcanlogin BOOLEAN,
    rolreplication BOOLEAN DEFAULT false, rolconnlimit INTEGER DEFAULT -1, rolpassword VARCHAR DEFAULT '********',
    rolvaliduntil TIMESTAMPTZ, rolbypassrls BOOLEAN DEFAULT false, rolconfig VARCHAR[]
);
CREATE VIEW pgcat.pg_user AS
    SELECT rolname AS usename, oid AS usesysid, rolcreatedb AS usecreatedb, rolsuper AS usesuper,
           rolreplication AS userepl, rolbypassrls AS usebypassrls, '********' AS passwd,
           rolvaliduntil AS valuntil, rolconfig AS useconfig
    FROM pgcat.pg_roles WHERE rolcanlogin;
CREATE VIEW pgcat.pg_authid AS SELECT * FROM pgcat.pg_roles;
CREATE TABLE pgcat.pg_auth_members (oid BIGINT, roleid BIGINT, member BIGINT, grantor BIGINT, admin_option BOOLEAN);

CREATE TABLE pgcat.pg_database (
    oid BIGINT, datname VARCHAR, datdba BIGINT DEFAULT 10, encoding INTEGER DEFAULT 6,
    datlocprovider VARCHAR DEFAULT 'c', datistemplate BOOLEAN DEFAULT false, datallowconn BOOLEAN DEFAULT true,
    datconnlimit INTEGER DEFAULT -1, datfrozenxid BIGINT DEFAULT 0, datminmxid BIGINT DEFAULT 0,
    dattablespace BIGINT DEFAULT 1663, datcollate VARCHAR DEFAULT 'C.UTF-8', datctype VARCHAR DEFAULT 'C.UTF-8',
    daticulocale VARCHAR, daticurules VARCHAR, datcollversion VARCHAR, datacl VARCHAR[]
);

CREATE TABLE pgcat.pg_tablespace (oid BIGINT, spcname VARCHAR, spcowner BIGINT, spcacl VARCHAR[], spcoptions VARCHAR[]);
INSERT INTO pgcat.pg_tablespace VALUES (1663, 'pg_default', 10, NULL, NULL);

CREATE TABLE pgcat.pg_am (oid BIGINT, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR);
INSERT INTO pgcat.pg_am VALUES (2, 'heap', 'heap_tableam_handler', 't'), (403, 'btree', 'bthandler', 'i');

CREATE TABLE pgcat.pg_collation (
    oid BIGINT, collname VARCHAR, collnamespace BIGINT, collowner BIGINT, collprovider VARCHAR,
    collisdeterministic BOOLEAN, collencoding INTEGER, collcollate VARCHAR, collctype VARCHAR,
    colliculocale VARCHAR, collicurules VARCHAR, collversion VARCHAR
);
INSERT INTO pgcat.pg_collation VALUES
    (100, 'default', 11, 10, 'd', true, -1, NULL, NULL, NULL, NULL, NULL),
    (950, 'C', 11, 10, 'c', true, -1, 'C', 'C', NULL, NULL, NULL),
    (951, 'POSIX', 11, 10, 'c', true, -1, 'POSIX', 'POSIX', NULL, NULL, NULL);

-- Objects statguard does not have: empty, with PostgreSQL's columns so joins bind.
CREATE TABLE pgcat.pg_attrdef (oid BIGINT, adrelid BIGINT, adnum SMALLINT, adbin VARCHAR);
CREATE TABLE pgcat.pg_index (
    indexrelid BIGINT, indrelid BIGINT, indnatts SMALLINT, indnkeyatts SMALLINT, indisunique BOOLEAN,
    indnullsnotdistinct BOOLEAN, indisprimary BOOLEAN, indisexclusion BOOLEAN, indimmediate BOOLEAN,
    indisclustered BOOLEAN, indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN,
    indislive BOOLEAN, indisreplident BOOLEAN, indkey SMALLINT[], indcollation BIGINT[],
    indclass BIGINT[], indoption SMALLINT[], indexprs VARCHAR, indpred VARCHAR
);
CREATE TABLE pgcat.pg_constraint (
    oid BIGINT, conname VARCHAR, connamespace BIGINT, contype VARCHAR, condeferrable BOOLEAN,
    condeferred BOOLEAN, convalidated BOOLEAN, conrelid BIGINT, contypid BIGINT, conindid BIGINT,
    conparentid BIGINT, confrelid BIGINT, confupdtype VARCHAR, confdeltype VARCHAR,
    confmatchtype VARCHAR, conislocal BOOLEAN, coninhcount SMALLINT, connoinherit BOOLEAN,
    conkey SMALLINT[], confkey SMALLINT[], conpfeqop BIGINT[], conppeqop BIGINT[], conffeqop BIGINT[],
    confdelsetcols SMALLINT[], conexclop BIGINT[], conbin VARCHAR
);
CREATE TABLE pgcat.pg_inherits (inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN);
CREATE TABLE pgcat.pg_trigger (
    oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, tgfoid BIGINT, tgtype SMALLINT,
    tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstrrelid BIGINT, tgconstrindid BIGINT,
    tgconstraint BIGINT, tgdeferrable BOOLEAN, tginitdeferred BOOLEAN, tgnargs SMALLINT,
    tgattr SMALLINT[], tgargs VARCHAR, tgqual VARCHAR, tgoldtable VARCHAR, tgnewtable VARCHAR
);
CREATE TABLE pgcat.pg_rewrite (
    oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, ev_enabled VARCHAR,
    is_instead BOOLEAN, ev_qual VARCHAR, ev_action VARCHAR
);
CREATE TABLE pgcat.pg_policy (
    oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN,
    polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR
);
CREATE TABLE pgcat.pg_proc (
    oid BIGINT, proname VARCHAR, pronamespace BIGINT, proowner BIGINT, prolang BIGINT, procost REAL,
    prorows REAL, provariadic BIGINT, prosupport VARCHAR, prokind VARCHAR, prosecdef BOOLEAN,
    proleakproof BOOLEAN, proisstrict BOOLEAN, proretset BOOLEAN, provolatile VARCHAR,
    proparallel VARCHAR, pronargs SMALLINT, pronargdefaults SMALLINT, prorettype BIGINT,
    proargtypes BIGINT[], proallargtypes BIGINT[], proargmodes VARCHAR[], proargnames VARCHAR[],
    proargdefaults VARCHAR, protrftypes BIGINT[], prosrc VARCHAR, probin VARCHAR, prosqlbody VARCHAR,
    proconfig VARCHAR[], proacl VARCHAR[]
);
CREATE TABLE pgcat.pg_sequence (
    seqrelid BIGINT, seqtypid BIGINT, seqstart BIGINT, seqincrement BIGINT, seqmax BIGINT,
    seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN
);
CREATE TABLE pgcat.pg_depend (
    classid BIGINT, objid BIGINT, objsubid INTEGER, refclassid BIGINT, refobjid BIGINT,
    refobjsubid INTEGER, deptype VARCHAR
);
CREATE TABLE pgcat.pg_extension (
    oid BIGINT, extname VARCHAR, extowner BIGINT, extnamespace BIGINT, extrelocatable BOOLEAN,
    extversion VARCHAR, extconfig BIGINT[], extcondition VARCHAR[]
);
CREATE TABLE pgcat.pg_enum (oid BIGINT, enumtypid BIGINT, enumsortorder REAL, enumlabel VARCHAR);
CREATE TABLE pgcat.pg_range (
    rngtypid BIGINT, rngsubtype BIGINT, rngmultitypid BIGINT, rngcollation BIGINT, rngsubopc BIGINT,
    rngcanonical VARCHAR, rngsubdiff VARCHAR
);
-- operator classes: statguard has no indexes, so none is ever named by one
CREATE TABLE pgcat.pg_opclass (
    oid BIGINT, opcmethod BIGINT, opcname VARCHAR, opcnamespace BIGINT, opcowner BIGINT, opcfamily BIGINT,
    opcintype BIGINT, opcdefault BOOLEAN, opckeytype BIGINT
);
-- statistics views: empty, since live and dead tuple counts would tell how many rows a table has
CREATE TABLE pgcat.pg_stat_user_tables (
    relid BIGINT, schemaname VARCHAR, relname VARCHAR, seq_scan BIGINT, seq_tup_read BIGINT, idx_scan BIGINT,
    idx_tup_fetch BIGINT, n_tup_ins BIGINT, n_tup_upd BIGINT, n_tup_del BIGINT, n_tup_hot_upd BIGINT,
    n_live_tup BIGINT, n_dead_tup BIGINT, n_mod_since_analyze BIGINT, n_ins_since_vacuum BIGINT,
    last_vacuum TIMESTAMPTZ, last_autovacuum TIMESTAMPTZ, last_analyze TIMESTAMPTZ, last_autoanalyze TIMESTAMPTZ,
    vacuum_count BIGINT, autovacuum_count BIGINT, analyze_count BIGINT, autoanalyze_count BIGINT
);
CREATE VIEW pgcat.pg_stat_all_tables AS SELECT * FROM pgcat.pg_stat_user_tables;
-- other sessions are not shown (nor this one's query text: it is in the guard's log)
CREATE TABLE pgcat.pg_stat_activity (
    datid BIGINT, datname VARCHAR, pid INTEGER, leader_pid INTEGER, usesysid BIGINT, usename VARCHAR,
    application_name VARCHAR, client_addr VARCHAR, client_hostname VARCHAR, client_port INTEGER,
    backend_start TIMESTAMPTZ, xact_start TIMESTAMPTZ, query_start TIMESTAMPTZ, state_change TIMESTAMPTZ,
    wait_event_type VARCHAR, wait_event VARCHAR, state VARCHAR, backend_xid BIGINT, backend_xmin BIGINT,
    query_id BIGINT, query VARCHAR, backend_type VARCHAR
);
-- SQL key words, from DuckDB's parser (PostgreSQL's grammar): R reserved, U unreserved,
-- C column name, T type or function name
CREATE TABLE pgcat._keywords AS
    SELECT keyword_name AS word,
           CASE keyword_category WHEN 'reserved' THEN 'R' WHEN 'unreserved' THEN 'U'
                WHEN 'column_name' THEN 'C' ELSE 'T' END AS catcode,
           keyword_category <> 'reserved' AS barelabel,
           CASE keyword_category WHEN 'reserved' THEN 'reserved' WHEN 'unreserved' THEN 'unreserved'
                WHEN 'column_name' THEN 'unreserved (cannot be function or type name)'
                ELSE 'reserved (can be function or type name)' END AS catdesc,
           CASE WHEN keyword_category <> 'reserved' THEN 'can be bare label' ELSE 'requires AS' END AS baredesc
    FROM duckdb_keywords() ORDER BY keyword_name;
CREATE TABLE pgcat.pg_foreign_table (ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]);
CREATE TABLE pgcat.pg_partitioned_table (
    partrelid BIGINT, partstrat VARCHAR, partnatts SMALLINT, partdefid BIGINT, partattrs SMALLINT[]
);
CREATE TABLE pgcat.pg_matviews (
    schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, tablespace VARCHAR,
    hasindexes BOOLEAN, ispopulated BOOLEAN, definition VARCHAR
);
CREATE TABLE pgcat.pg_views (schemaname VARCHAR, viewname VARCHAR, viewowner VARCHAR, definition VARCHAR);
CREATE TABLE pgcat.pg_indexes (
    schemaname VARCHAR, tablename VARCHAR, indexname VARCHAR, tablespace VARCHAR, indexdef VARCHAR
);
CREATE TABLE pgcat.pg_settings (
    name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR DEFAULT 'statguard',
    short_desc VARCHAR DEFAULT '', extra_desc VARCHAR, context VARCHAR, vartype VARCHAR DEFAULT 'string',
    source VARCHAR DEFAULT 'default', min_val VARCHAR, max_val VARCHAR, enumvals VARCHAR[], boot_val VARCHAR,
    reset_val VARCHAR, sourcefile VARCHAR, sourceline INTEGER, pending_restart BOOLEAN DEFAULT false
);

CREATE VIEW pgcat.pg_tables AS
    SELECT n.nspname AS schemaname, c.relname AS tablename, r.rolname AS tableowner,
           CAST(NULL AS VARCHAR) AS tablespace, false AS hasindexes, false AS hasrules,
           false AS hastriggers, false AS rowsecurity
    FROM pgcat.pg_class c
    JOIN pgcat.pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pgcat.pg_roles r ON r.oid = c.relowner
    WHERE c.relkind IN ('r', 'p');

-- 'pg_class'::regclass and the like: PostgreSQL's fixed OIDs of its catalogs
CREATE TABLE pgcat._system_relations (relname VARCHAR, oid BIGINT);
INSERT INTO pgcat._system_relations VALUES
    ('pg_type', 1247), ('pg_attribute', 1249), ('pg_proc', 1255), ('pg_class', 1259),
    ('pg_authid', 1260), ('pg_database', 1262), ('pg_tablespace', 1213), ('pg_am', 2601),
    ('pg_attrdef', 2604), ('pg_constraint', 2606), ('pg_depend', 2608), ('pg_description', 2609),
    ('pg_index', 2610), ('pg_inherits', 2611), ('pg_namespace', 2615), ('pg_rewrite', 2618),
    ('pg_trigger', 2620), ('pg_sequence', 2224), ('pg_policy', 3256), ('pg_collation', 3456),
    ('pg_extension', 3079), ('pg_enum', 3501), ('pg_range', 3541);

-- PostgreSQL's functions, as macros over the relations above ----------------------
-- Macros expand in place: those that read a relation alias it "_m" and qualify its
-- columns, so that the calling query's aliases (c, t, n...) cannot capture them.

CREATE MACRO pgcat.format_type(type_oid, typmod) AS (
    SELECT CASE
        WHEN _m.typname = 'numeric' AND typmod >= 4
            THEN 'numeric(' || ((typmod - 4) >> 16) || ',' || ((typmod - 4) & 65535) || ')'
        ELSE _m.format_name
    END
    FROM pgcat.pg_type _m WHERE _m.oid = type_oid
);
CREATE MACRO pgcat.pg_get_userbyid(role_oid) AS
    coalesce(
        (SELECT first(_m.rolname) FROM pgcat.pg_roles _m WHERE _m.oid = role_oid),
        'unknown (OID=' || role_oid || ')'
    );
CREATE MACRO pgcat.pg_table_is_visible(rel) AS rel IN (SELECT _m.oid FROM pgcat.pg_class _m);
CREATE MACRO pgcat.pg_type_is_visible(t) AS true;
CREATE MACRO pgcat.pg_function_is_visible(f) AS true;
CREATE MACRO pgcat.pg_collation_is_visible(c) AS true;
CREATE MACRO pgcat.pg_opclass_is_visible(c) AS true;
CREATE MACRO pgcat.pg_get_expr(expression, relation) AS CAST(NULL AS VARCHAR),
    (expression, relation, pretty) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_indexdef(i) AS CAST(NULL AS VARCHAR),
    (i, column_no, pretty) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_constraintdef(c) AS CAST(NULL AS VARCHAR), (c, pretty) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_viewdef(v) AS CAST(NULL AS VARCHAR), (v, pretty) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_triggerdef(t) AS CAST(NULL AS VARCHAR), (t, pretty) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_ruledef(r) AS CAST(NULL AS VARCHAR), (r, pretty) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_partkeydef(r) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_function_arguments(f) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_function_identity_arguments(f) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_function_result(f) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_statisticsobjdef_columns(s) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_get_serial_sequence(t, c) AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.pg_relation_is_publishable(r) AS false;
CREATE MACRO pgcat.pg_encoding_to_char(e) AS CASE e WHEN 6 THEN 'UTF8' WHEN 0 THEN 'SQL_ASCII' ELSE '' END;
CREATE MACRO pgcat.pg_char_to_encoding(e) AS CASE upper(e) WHEN 'UTF8' THEN 6 WHEN 'SQL_ASCII' THEN 0 ELSE -1 END;
CREATE MACRO pgcat.obj_description(o) AS
    (SELECT first(_m.description) FROM pgcat.pg_description _m WHERE _m.objoid = o AND _m.objsubid = 0),
    (o, catalog_name) AS
    (SELECT first(_m.description) FROM pgcat.pg_description _m WHERE _m.objoid = o AND _m.objsubid = 0);
CREATE MACRO pgcat.col_description(o, column_no) AS
    (SELECT first(_m.description) FROM pgcat.pg_description _m
     WHERE _m.objoid = o AND _m.objsubid = column_no);
CREATE MACRO pgcat.shobj_description(o, catalog_name) AS CAST(NULL AS VARCHAR);
-- an analyst may read (SELECT) what they see, and change nothing
CREATE MACRO pgcat.has_table_privilege(t, privilege) AS upper(privilege) LIKE '%SELECT%',
    (r, t, privilege) AS upper(privilege) LIKE '%SELECT%';
CREATE MACRO pgcat.has_column_privilege(t, c, privilege) AS upper(privilege) LIKE '%SELECT%',
    (r, t, c, privilege) AS upper(privilege) LIKE '%SELECT%';
CREATE MACRO pgcat.has_schema_privilege(s, privilege) AS upper(privilege) LIKE '%USAGE%',
    (r, s, privilege) AS upper(privilege) LIKE '%USAGE%';
CREATE MACRO pgcat.has_database_privilege(d, privilege) AS upper(privilege) LIKE '%CONNECT%',
    (r, d, privilege) AS upper(privilege) LIKE '%CONNECT%';
CREATE MACRO pgcat.has_function_privilege(f, privilege) AS false, (r, f, privilege) AS false;
CREATE MACRO pgcat.has_any_column_privilege(t, privilege) AS upper(privilege) LIKE '%SELECT%',
    (r, t, privilege) AS upper(privilege) LIKE '%SELECT%';
-- sizes are not shown: they would tell how many rows a table has
CREATE MACRO pgcat.pg_table_size(r) AS CAST(0 AS BIGINT);
CREATE MACRO pgcat.pg_total_relation_size(r) AS CAST(0 AS BIGINT);
CREATE MACRO pgcat.pg_indexes_size(r) AS CAST(0 AS BIGINT);
CREATE MACRO pgcat.pg_relation_size(r) AS CAST(0 AS BIGINT), (r, fork) AS CAST(0 AS BIGINT);
CREATE MACRO pgcat.pg_database_size(d) AS CAST(0 AS BIGINT);
CREATE MACRO pgcat.pg_size_pretty(n) AS CAST(n AS VARCHAR) || ' bytes';
CREATE MACRO pgcat.pg_tablespace_location(t) AS '';
CREATE MACRO pgcat.pg_is_in_recovery() AS false;
CREATE MACRO pgcat.pg_get_keywords() AS TABLE SELECT * FROM pgcat._keywords;
-- statistics: not shown (row counts would tell how many rows a table has)
CREATE MACRO pgcat.pg_stat_get_numscans(i) AS CAST(NULL AS BIGINT);
CREATE MACRO pgcat.pg_stat_get_live_tuples(r) AS CAST(NULL AS BIGINT);
CREATE MACRO pgcat.pg_stat_get_dead_tuples(r) AS CAST(NULL AS BIGINT);
-- a session may end only itself, and does so by closing its connection
CREATE MACRO pgcat.pg_terminate_backend(pid) AS false, (pid, timeout) AS false;
CREATE MACRO pgcat.pg_cancel_backend(pid) AS false;
CREATE MACRO pgcat.txid_current() AS CAST(1 AS BIGINT);
CREATE MACRO pgcat.pg_current_xact_id() AS CAST(1 AS BIGINT);
CREATE MACRO pgcat.inet_server_addr() AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.inet_server_port() AS CAST(NULL AS INTEGER);
CREATE MACRO pgcat.inet_client_addr() AS CAST(NULL AS VARCHAR);
CREATE MACRO pgcat.array_upper(a, dimension) AS CASE WHEN len(a) = 0 THEN NULL ELSE len(a) END;
CREATE MACRO pgcat.array_lower(a, dimension) AS CASE WHEN len(a) = 0 THEN NULL ELSE 1 END;
CREATE MACRO pgcat.quote_ident(name) AS
    CASE WHEN regexp_full_match(name, '[a-z_][a-z0-9_$]*') THEN name
         ELSE '"' || replace(name, '"', '""') || '"' END;
-- "public".x, pg_catalog.x, "Name" -> the relation name as stored
CREATE MACRO pgcat._unquoted(name) AS
    CASE WHEN name LIKE '"%"' THEN replace(name[2:-2], '""', '"') ELSE lower(name) END;
CREATE MACRO pgcat._unqualified(name) AS
    CASE WHEN regexp_matches(name, '^"?(public|pg_catalog)"?\.')
         THEN pgcat._unquoted(regexp_replace(name, '^"?(public|pg_catalog)"?\.', ''))
         ELSE pgcat._unquoted(name) END;
-- reg* casts: a name to its OID (unknown names fail as in PostgreSQL), an OID to its name
CREATE MACRO pgcat.to_regclass(name) AS coalesce(
    (SELECT first(_m.oid) FROM pgcat.pg_class _m WHERE lower(_m.relname) = lower(pgcat._unqualified(name))),
    (SELECT first(_m.oid) FROM pgcat._system_relations _m WHERE _m.relname = pgcat._unqualified(name)));
CREATE MACRO pgcat.regclass_oid(name) AS
    coalesce(pgcat.to_regclass(name), error('relation "' || name || '" does not exist'));
CREATE MACRO pgcat.regclass_name(rel) AS coalesce(
    (SELECT first(_m.relname) FROM pgcat.pg_class _m WHERE _m.oid = rel),
    (SELECT first(_m.relname) FROM pgcat._system_relations _m WHERE _m.oid = rel), CAST(rel AS VARCHAR));
CREATE MACRO pgcat.to_regtype(name) AS
    (SELECT first(_m.oid) FROM pgcat.pg_type _m
     WHERE _m.typname = pgcat._unqualified(name) OR _m.format_name = lower(name));
CREATE MACRO pgcat.regtype_oid(name) AS
    coalesce(pgcat.to_regtype(name), error('type "' || name || '" does not exist'));
CREATE MACRO pgcat.regtype_name(t) AS
    coalesce((SELECT first(_m.format_name) FROM pgcat.pg_type _m WHERE _m.oid = t), CAST(t AS VARCHAR));
CREATE MACRO pgcat.to_regnamespace(name) AS
    (SELECT first(_m.oid) FROM pgcat.pg_namespace _m WHERE _m.nspname = pgcat._unqualified(name));
CREATE MACRO pgcat.regnamespace_oid(name) AS
    coalesce(pgcat.to_regnamespace(name), error('schema "' || name || '" does not exist'));
CREATE MACRO pgcat.regnamespace_name(n) AS
    coalesce((SELECT first(_m.nspname) FROM pgcat.pg_namespace _m WHERE _m.oid = n), CAST(n AS VARCHAR));
CREATE MACRO pgcat.to_regrole(name) AS
    (SELECT first(_m.oid) FROM pgcat.pg_roles _m WHERE _m.rolname = pgcat._unqualified(name));
CREATE MACRO pgcat.regrole_oid(name) AS
    coalesce(pgcat.to_regrole(name), error('role "' || name || '" does not exist'));
CREATE MACRO pgcat.regrole_name(r) AS
    coalesce((SELECT first(_m.rolname) FROM pgcat.pg_roles _m WHERE _m.oid = r), CAST(r AS VARCHAR));
CREATE MACRO pgcat.regproc_name(p) AS regexp_replace(CAST(p AS VARCHAR), '^pg_catalog\.', '');
-- information_schema, as views over the catalog ----------------------------------

CREATE VIEW infoschema.schemata AS
    SELECT 'statguard' AS catalog_name, nspname AS schema_name, 'statguard' AS schema_owner,
           CAST(NULL AS VARCHAR) AS default_character_set_catalog,
           CAST(NULL AS VARCHAR) AS default_character_set_schema,
           CAST(NULL AS VARCHAR) AS default_character_set_name, CAST(NULL AS VARCHAR) AS sql_path
    FROM pgcat.pg_namespace;

CREATE VIEW infoschema.tables AS
    SELECT 'statguard' AS table_catalog, n.nspname AS table_schema, c.relname AS table_name,
           'BASE TABLE' AS table_type, CAST(NULL AS VARCHAR) AS self_referencing_column_name,
           CAST(NULL AS VARCHAR) AS reference_generation, CAST(NULL AS VARCHAR) AS user_defined_type_catalog,
           CAST(NULL AS VARCHAR) AS user_defined_type_schema, CAST(NULL AS VARCHAR) AS user_defined_type_name,
           'NO' AS is_insertable_into, 'NO' AS is_typed, CAST(NULL AS VARCHAR) AS commit_action
    FROM pgcat.pg_class c JOIN pgcat.pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p');

CREATE VIEW infoschema.columns AS
    SELECT 'statguard' AS table_catalog, n.nspname AS table_schema, c.relname AS table_name,
           a.attname AS column_name, CAST(a.attnum AS INTEGER) AS ordinal_position,
           CAST(NULL AS VARCHAR) AS column_default, 'YES' AS is_nullable,
           CASE WHEN t.typname = 'numeric' THEN 'numeric' ELSE t.format_name END AS data_type,
           CAST(NULL AS INTEGER) AS character_maximum_length,
           CAST(NULL AS INTEGER) AS character_octet_length,
           CAST(CASE WHEN a.atttypmod >= 4 THEN (a.atttypmod - 4) >> 16
                     WHEN t.typname IN ('int2') THEN 16 WHEN t.typname = 'int4' THEN 32
                     WHEN t.typname = 'int8' THEN 64 WHEN t.typname = 'float4' THEN 24
                     WHEN t.typname = 'float8' THEN 53 END AS INTEGER) AS numeric_precision,
           CAST(CASE WHEN t.typname = 'numeric' THEN 10 WHEN t.typcategory = 'N' THEN 2 END AS INTEGER)
               AS numeric_precision_radix,
           CAST(CASE WHEN a.atttypmod >= 4 THEN (a.atttypmod - 4) & 65535
                     WHEN t.typname IN ('int2', 'int4', 'int8') THEN 0 END AS INTEGER) AS numeric_scale,
           CAST(CASE WHEN t.typcategory = 'D' THEN 6 END AS INTEGER) AS datetime_precision,
           CAST(NULL AS VARCHAR) AS interval_type, CAST(NULL AS INTEGER) AS interval_precision,
           CAST(NULL AS VARCHAR) AS character_set_catalog, CAST(NULL AS VARCHAR) AS character_set_schema,
           CAST(NULL AS VARCHAR) AS character_set_name, CAST(NULL AS VARCHAR) AS collation_catalog,
           CAST(NULL AS VARCHAR) AS collation_schema, CAST(NULL AS VARCHAR) AS collation_name,
           CAST(NULL AS VARCHAR) AS domain_catalog, CAST(NULL AS VARCHAR) AS domain_schema,
           CAST(NULL AS VARCHAR) AS domain_name, 'statguard' AS udt_catalog, 'pg_catalog' AS udt_schema,
           t.typname AS udt_name, CAST(NULL AS VARCHAR) AS scope_catalog, CAST(NULL AS VARCHAR) AS scope_schema,
           CAST(NULL AS VARCHAR) AS scope_name, CAST(NULL AS INTEGER) AS maximum_cardinality,
           CAST(a.attnum AS VARCHAR) AS dtd_identifier, 'NO' AS is_self_referencing, 'NO' AS is_identity,
           CAST(NULL AS VARCHAR) AS identity_generation, CAST(NULL AS VARCHAR) AS identity_start,
           CAST(NULL AS VARCHAR) AS identity_increment, CAST(NULL AS VARCHAR) AS identity_maximum,
           CAST(NULL AS VARCHAR) AS identity_minimum, CAST(NULL AS VARCHAR) AS identity_cycle,
           'NEVER' AS is_generated, CAST(NULL AS VARCHAR) AS generation_expression, 'NO' AS is_updatable
    FROM pgcat.pg_attribute a
    JOIN pgcat.pg_class c ON c.oid = a.attrelid
    JOIN pgcat.pg_namespace n ON n.oid = c.relnamespace
    JOIN pgcat.pg_type t ON t.oid = a.atttypid
    WHERE a.attnum > 0 AND NOT a.attisdropped;

CREATE VIEW infoschema.views AS
    SELECT CAST(NULL AS VARCHAR) AS table_catalog, CAST(NULL AS VARCHAR) AS table_schema,
           CAST(NULL AS VARCHAR) AS table_name, CAST(NULL AS VARCHAR) AS view_definition
    WHERE false;

CREATE VIEW infoschema.table_privileges AS
    SELECT 'statguard' AS grantor, (SELECT first(rolname) FROM pgcat.pg_roles WHERE rolcanlogin) AS grantee, 'statguard' AS table_catalog,
           table_schema, table_name, 'SELECT' AS privilege_type, 'NO' AS is_grantable, 'YES' AS with_hierarchy
    FROM infoschema.tables;

CREATE VIEW infoschema.table_constraints AS
    SELECT CAST(NULL AS VARCHAR) AS constraint_catalog, CAST(NULL AS VARCHAR) AS constraint_schema,
           CAST(NULL AS VARCHAR) AS constraint_name, CAST(NULL AS VARCHAR) AS table_catalog,
           CAST(NULL AS VARCHAR) AS table_schema, CAST(NULL AS VARCHAR) AS table_name,
           CAST(NULL AS VARCHAR) AS constraint_type, CAST(NULL AS VARCHAR) AS is_deferrable,
           CAST(NULL AS VARCHAR) AS initially_deferred, CAST(NULL AS VARCHAR) AS enforced
    WHERE false;

CREATE VIEW infoschema.key_column_usage AS
    SELECT CAST(NULL AS VARCHAR) AS constraint_catalog, CAST(NULL AS VARCHAR) AS constraint_schema,
           CAST(NULL AS VARCHAR) AS constraint_name, CAST(NULL AS VARCHAR) AS table_catalog,
           CAST(NULL AS VARCHAR) AS table_schema, CAST(NULL AS VARCHAR) AS table_name,
           CAST(NULL AS VARCHAR) AS column_name, CAST(NULL AS INTEGER) AS ordinal_position,
           CAST(NULL AS INTEGER) AS position_in_unique_constraint
    WHERE false;

CREATE VIEW infoschema.routines AS
    SELECT CAST(NULL AS VARCHAR) AS specific_catalog, CAST(NULL AS VARCHAR) AS specific_schema,
           CAST(NULL AS VARCHAR) AS specific_name, CAST(NULL AS VARCHAR) AS routine_catalog,
           CAST(NULL AS VARCHAR) AS routine_schema, CAST(NULL AS VARCHAR) AS routine_name,
           CAST(NULL AS VARCHAR) AS routine_type, CAST(NULL AS VARCHAR) AS data_type
    WHERE false;
