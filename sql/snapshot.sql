-- Snapshot of one protected table, built once per data version in a private DuckDB file
-- that the guard then opens read-only with external access disabled.
--   {staging}  every declared dimension and measure, the privacy unit, and _rid
--   {source}   the policy's source (read_csv / read_parquet / attached table)
-- _rid follows the source's row order and never changes within a data version; DuckDB's
-- own rowid follows physical storage and is not identity. _uid numbers privacy units;
-- _ukey is a hash of the unit's own id, which (unlike _uid) does not change when other
-- units come or go: noise mode's choice of a unit's cells must depend on that unit alone.
-- Identifier columns other than the unit are never read; the unit itself is dropped
-- once _uid is assigned, so no identifying value ever reaches the query connection.
CREATE TABLE {staging} AS
SELECT (row_number() OVER ()) - 1 AS _rid, {unit} AS _unit, {columns}
FROM {source};

CREATE TABLE {units} AS
SELECT _unit, (row_number() OVER (ORDER BY _unit)) - 1 AS _uid, hash(_unit) AS _ukey
FROM (SELECT DISTINCT _unit FROM {staging} WHERE _unit IS NOT NULL);

CREATE TABLE {table} AS
SELECT s._rid::BIGINT AS _rid, u._uid::BIGINT AS _uid, u._ukey::UBIGINT AS _ukey, {qualified_columns}
FROM {staging} AS s JOIN {units} AS u ON s._unit = u._unit
ORDER BY s._rid;

DROP TABLE {staging};
DROP TABLE {units};
