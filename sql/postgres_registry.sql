-- The registry of PostgreSQL snapshots, one row per (table, data version), in the
-- guard's schema. The guard never queries a live source: every protected table is
-- answered from the snapshot named here, so history and answers stay consistent
-- within a data version. Written only by the owner role (backend.owner_dsn); the
-- query role reads it.
--   {registry}  the schema-qualified registry table
CREATE TABLE IF NOT EXISTS {registry} (
    name text NOT NULL,
    data_version text NOT NULL,
    snapshot text NOT NULL,
    info json NOT NULL,
    built_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, data_version)
);
