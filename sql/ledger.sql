-- The privacy budget ledger of pcor-sql (DESIGN.md §2 "Budget ledger").
--
-- It lives in the DuckDB database the releases are made from, so the budget travels with the
-- data: per dataset the limit, the spent ε and the history of releases. pcor_sql.engine.ledger
-- runs this script (idempotent: CREATE ... IF NOT EXISTS) before it reads or charges; the tables
-- are prefixed pcor_ so they do not clash with user tables.

-- One row per dataset that has a limit or has been charged.
-- limit_epsilon NULL means no limit has been set (releases are recorded but never refused).
-- spent_epsilon and releases are a running total of pcor_release_history for the dataset.
-- spent_epsilon + spent_residual carries that sum in double-double precision (compensated
-- summation), so rounding errors do not pile up: ten charges of 0.1 spend exactly 1.0, not
-- 0.9999999999999999. Every charge updates this row, which is what makes two concurrent
-- charges of one dataset conflict (DuckDB's optimistic concurrency refuses the second writer
-- of a row).
CREATE TABLE IF NOT EXISTS pcor_budget (
    dataset        VARCHAR PRIMARY KEY,
    limit_epsilon  DOUBLE CHECK (limit_epsilon IS NULL OR (isfinite(limit_epsilon) AND limit_epsilon > 0)),
    spent_epsilon  DOUBLE NOT NULL DEFAULT 0 CHECK (isfinite(spent_epsilon) AND spent_epsilon >= 0),
    spent_residual DOUBLE NOT NULL DEFAULT 0,
    releases       BIGINT NOT NULL DEFAULT 0 CHECK (releases >= 0),
    created_at     TIMESTAMP NOT NULL,  -- UTC
    updated_at     TIMESTAMP NOT NULL   -- UTC
);

-- One row per charged release. release_id is chosen by the caller before the release is
-- computed; the primary key is what makes a repeated charge of one release a no-op.
-- seq numbers a dataset's releases 1, 2, 3, ... in charge order; spent_after is the dataset's
-- total spent ε once this release was charged.
CREATE TABLE IF NOT EXISTS pcor_release_history (
    release_id   VARCHAR PRIMARY KEY,
    dataset      VARCHAR NOT NULL,
    seq          BIGINT NOT NULL CHECK (seq >= 1),
    released_at  TIMESTAMP NOT NULL,    -- UTC
    mechanism    VARCHAR NOT NULL,
    epsilon      DOUBLE NOT NULL CHECK (isfinite(epsilon) AND epsilon > 0),
    record_key   VARCHAR,
    statement    VARCHAR,
    spent_after  DOUBLE NOT NULL
);
