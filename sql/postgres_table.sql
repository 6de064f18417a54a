-- Snapshot of a protected table that already lives in PostgreSQL (source: {{table: ...}}),
-- built by the owner role inside one REPEATABLE READ transaction, so the content
-- fingerprint that names its data version and the copied rows see the same data.
--   {snapshot}  the schema-qualified, versioned snapshot table
--   {source}    the policy's table
--   {unit}      the privacy unit's column in the source
--   {casts}     each declared dimension and measure, cast to the type the guard knows
--   {columns}   the same, as named in the snapshot
--   {order}     every published column, then the unit: a total order of the rows
--   {unit_order} the unit, as _uid numbers it
-- The source has no stable row order, so _rid numbers rows by their content: identical
-- rows are interchangeable, so the numbering is the same for the same data. _uid numbers
-- units densely in unit order; _ukey hashes the unit's own value, so (unlike _uid) it
-- does not move when other units come or go. Rows without a unit belong to nobody and
-- are dropped; the unit itself and every other identifier are never copied.
CREATE TABLE {snapshot} AS
SELECT (row_number() OVER (ORDER BY {order}) - 1)::bigint AS _rid,
       (dense_rank() OVER (ORDER BY {unit_order}) - 1)::bigint AS _uid,
       hashtextextended(s._unit::text, 0) AS _ukey,
       {columns}
FROM (SELECT {unit} AS _unit, {casts} FROM {source} WHERE {unit} IS NOT NULL) AS s
ORDER BY 1;

ANALYZE {snapshot};
