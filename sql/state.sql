-- The guard's own state store (DuckDB file STATE/guard.duckdb).
-- Append-only: the guard never updates or deletes a row of these tables.

CREATE SEQUENCE IF NOT EXISTS query_log_id START 1;

-- One row per request, answered or not, written and committed BEFORE the answer leaves.
-- record_hash chains each row to the previous one (sha256 over prev_hash and the row's
-- canonical JSON), so an auditor can tell if a row was altered or removed.
CREATE TABLE IF NOT EXISTS query_log (
    id            BIGINT PRIMARY KEY DEFAULT nextval('query_log_id'),
    ts            TIMESTAMP NOT NULL,  -- UTC
    analyst       VARCHAR NOT NULL,
    sql           VARCHAR NOT NULL,
    canonical     VARCHAR,          -- canonical key of what was measured (NULL if rejected; post-processed: {"computed_from": [log ids]})
    data_version  VARCHAR,
    decision      VARCHAR NOT NULL, -- answered | post-processed | rejected | refused | error | explained | login-failed
    error         VARCHAR,          -- GuardError class name, when not answered
    reason        VARCHAR,          -- the message the analyst received
    columns       JSON,             -- released column names
    rows          JSON,             -- released values (suppressed cells are NULL)
    flags         JSON,             -- per-cell flags
    notes         JSON,
    elapsed_ms    DOUBLE,
    prev_hash     VARCHAR NOT NULL,
    record_hash   VARCHAR NOT NULL,
    levels        JSON              -- an answer of several grouping sets: each row's set, {"sets": [[keys]], "rows": [i]}
);

-- Stores created before the log kept levels gain the column (NULL in their records, which
-- their hashes never covered: guard/state/chain.py, LATER_FIELDS).
ALTER TABLE query_log ADD COLUMN IF NOT EXISTS levels JSON;

-- Cells released per table and additive quantity, for linked-table protection: a new
-- answer is protected together with what was published (kept) and withheld (stays
-- withheld) before. Written in the same transaction as the log row of the answer.
-- Holds keys and a status only, never a value. INSERT OR IGNORE keeps the first status.
CREATE TABLE IF NOT EXISTS released_cells (
    data_version  VARCHAR NOT NULL,
    table_name    VARCHAR NOT NULL,
    space         VARCHAR NOT NULL,  -- count(*) | count(col) | sum(col)
    cell_key      VARCHAR NOT NULL,  -- JSON: one tagged value per dimension, "*" = total
    analyst       VARCHAR NOT NULL,
    status        VARCHAR NOT NULL,  -- published | withheld | withheld-by-history[:<control>]
    log_id        BIGINT NOT NULL,   -- the query_log row that released it
    PRIMARY KEY (data_version, table_name, space, cell_key, analyst)
);

-- Noise mode: every charge to the privacy budgets, written in the same transaction as
-- the log row of the answer it paid for, BEFORE the answer leaves. epsilon and the
-- per-account amounts are exact fractions ("num/den"). Never updated or deleted.
CREATE TABLE IF NOT EXISTS budget_ledger (
    sequence      BIGINT PRIMARY KEY,
    ts            TIMESTAMP NOT NULL,  -- UTC
    analyst       VARCHAR NOT NULL,
    epsilon       VARCHAR NOT NULL,  -- spent from the analyst's own account
    accounts      JSON NOT NULL,     -- {"global": "1/2", "group:x": "0"}: amounts that differ
    note          VARCHAR NOT NULL,
    log_id        BIGINT NOT NULL
);

-- Noise mode: one noisy draw per statistic of a cell (cache key: the statistic, its
-- bounds and the canonical selection of the cell), so repeating a query in any phrasing
-- returns the same value. Holds released (noisy) values only.
CREATE TABLE IF NOT EXISTS noise_draws (
    data_version  VARCHAR NOT NULL,
    table_name    VARCHAR NOT NULL,
    cache_key     VARCHAR NOT NULL,
    value         DOUBLE NOT NULL,
    scale         VARCHAR NOT NULL,
    epsilon       VARCHAR NOT NULL,
    mechanism     VARCHAR NOT NULL,
    log_id        BIGINT NOT NULL,
    PRIMARY KEY (data_version, table_name, cache_key)
);

-- Noise mode: which analyst has received which draw (a draw is paid once per analyst).
CREATE TABLE IF NOT EXISTS noise_received (
    data_version  VARCHAR NOT NULL,
    table_name    VARCHAR NOT NULL,
    cache_key     VARCHAR NOT NULL,
    analyst       VARCHAR NOT NULL,
    log_id        BIGINT NOT NULL,
    PRIMARY KEY (data_version, table_name, cache_key, analyst)
);

-- History audit: every query set a released cell added to an audit state (guard.audit.
-- history), as a roaring bitmap of finest-cell ids, written in the transaction of the log
-- row of its answer. An audit state is rebuilt from these rows, in order, after a restart.
-- value is the released SUM (read only by the partial-disclosure LP; NULL otherwise).
CREATE TABLE IF NOT EXISTS audit_sets (
    data_version  VARCHAR NOT NULL,
    table_name    VARCHAR NOT NULL,
    space         VARCHAR NOT NULL,  -- count | sum(col)
    scope         VARCHAR NOT NULL,  -- all | group:NAME
    log_id        BIGINT NOT NULL,
    position      INTEGER NOT NULL,  -- order within the answer
    label         VARCHAR NOT NULL,  -- the cell's public dimension values
    cells         BLOB NOT NULL,
    value         DOUBLE,
    PRIMARY KEY (log_id, position)
);

-- History audit across data versions (guard/history/lineage.py): per table and data
-- version, the file (STATE/lineage/) of its rows' identities (finest cell, content digest,
-- unit digest; never a value), stored before the first answer on that version is
-- logged, so that answers released on it stay equations after the data changes.
CREATE TABLE IF NOT EXISTS audit_lineage (
    table_name    VARCHAR NOT NULL,
    data_version  VARCHAR NOT NULL,
    added         TIMESTAMP NOT NULL,
    file          VARCHAR NOT NULL,  -- relative to the state folder
    PRIMARY KEY (table_name, data_version)
);
