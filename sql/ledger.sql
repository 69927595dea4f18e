-- The privacy budget ledger of pcor-sql (DESIGN.md §6 "Trust model").
--
-- It lives in schema `pcor` of the DuckDB database that holds the data (or of a ledger file),
-- so the budget travels with the data and `USE`/`ATTACH` on a caller's connection cannot
-- move it. pcor_sql.ledger.store runs this script (idempotent) with the ledger's database
-- in use, before it reads or charges.
--
-- The current layout is read from this script (pcor_sql.ledger.layout): a ledger whose tables
-- lack a column made here is refused until `pcor-sql budget migrate`, which fills the column
-- with its DEFAULT, else NULL (else pcor_sql.ledger.migration.FILLS). So a NOT NULL column added
-- here needs a DEFAULT, and a table added here goes into charge_rules.TABLE_NAMES (a test says so).
--
-- A privacy unit is a base table or a file (`memory.main.salaries`, `file:/data/x.parquet`,
-- `bundled:salaries`): every release is charged to each unit its relation reads, however it
-- is spelled. The three privacy notions hold under different neighbour relations, so each
-- unit keeps one total per notion and they are never added together.
--
-- A CHECK is bound when a row is written, with the catalog as it is then: a macro named
-- isfinite in the owner's database would run instead of the built-in, hence system.main.
-- Ledgers made before keep their unqualified CHECKs (the layout check reads columns, not
-- constraints, so nothing rebuilds them): there such a macro can make every write fail (charges
-- refused) or let a non-finite ε through the CHECK, which charge_rules refuses before writing.
CREATE SCHEMA IF NOT EXISTS pcor;

-- One row per (unit, notion) that has a limit or has been charged.
-- limit_epsilon NULL: no limit of its own (the notion's default limit applies if one is set;
-- once the ledger holds any limit, a unit with neither is refused).
-- spent_epsilon + spent_residual is the running total in double-double precision
-- (compensated summation): ten charges of 0.1 spend exactly 1.0. Every charge updates this
-- row, which is what makes two concurrent charges of one unit conflict (DuckDB's optimistic
-- concurrency refuses the second writer of a row).
CREATE TABLE IF NOT EXISTS pcor.budget (
    unit           VARCHAR NOT NULL,
    notion         VARCHAR NOT NULL CHECK (notion IN ('ocdp', 'dp', 'sp')),
    limit_epsilon  DOUBLE CHECK (limit_epsilon IS NULL OR (system.main.isfinite(limit_epsilon) AND limit_epsilon > 0)),
    spent_epsilon  DOUBLE NOT NULL DEFAULT 0 CHECK (system.main.isfinite(spent_epsilon) AND spent_epsilon >= 0),
    spent_residual DOUBLE NOT NULL DEFAULT 0,
    releases       BIGINT NOT NULL DEFAULT 0 CHECK (releases >= 0),
    created_at     TIMESTAMP NOT NULL,  -- UTC
    updated_at     TIMESTAMP NOT NULL,  -- UTC
    PRIMARY KEY (unit, notion)
);

-- Units the owner marked public (a lookup table): never charged.
CREATE TABLE IF NOT EXISTS pcor.units (
    unit       VARCHAR PRIMARY KEY,
    public     BOOLEAN NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

-- Ledger-wide settings: `default_limit_<notion>` (a limit for units without their own).
CREATE TABLE IF NOT EXISTS pcor.settings (
    name       VARCHAR PRIMARY KEY,
    value      DOUBLE,
    updated_at TIMESTAMP NOT NULL
);

-- One row per (charged release, unit). release_id is chosen before the release is computed;
-- the primary key makes a repeated charge of one release a no-op. seq numbers a unit's
-- charges of one notion 1, 2, 3, … ; spent_after is that total once this one was charged.
-- seeded: the run used a caller's seed, so its output was a deterministic function of the
-- data — recorded as "seeded, not private".
-- The history is the truth: a unit's spent_epsilon in pcor.budget is the sum of epsilon over
-- its rows with refunded = false (checked when a ledger is opened; `pcor-sql budget verify`).
-- outcome: 'running' from the reservation (written, with the new totals, before any row of
-- the data is read) until the work ends as 'answered', 'failed' (reason: a short class such as
-- 'not-found', 'data', 'no-valid-context', 'internal') or 'interrupted' (Ctrl-C, or — found
-- when a ledger is opened — the reserving process pid/host/process_token is gone). 'charged':
-- written by a charge that records no outcome (`charge_many`, or rows from before outcomes).
-- refunded: an owner's failure or interrupt gave the ε back (history shows "not charged").
CREATE TABLE IF NOT EXISTS pcor.history (
    release_id    VARCHAR NOT NULL,
    unit          VARCHAR NOT NULL,
    notion        VARCHAR NOT NULL,
    seq           BIGINT NOT NULL CHECK (seq >= 1),
    released_at   TIMESTAMP NOT NULL,    -- UTC
    mechanism     VARCHAR NOT NULL,
    epsilon       DOUBLE NOT NULL CHECK (system.main.isfinite(epsilon) AND epsilon > 0),
    k             BIGINT,                -- (ε, k)-sensitive privacy only
    record_key    VARCHAR,
    statement     VARCHAR,
    spent_after   DOUBLE NOT NULL,
    seeded        BOOLEAN NOT NULL,
    role          VARCHAR NOT NULL,      -- 'owner' or 'analyst'
    dataset       VARCHAR,               -- the registered dataset's label, if any
    analyst       VARCHAR,               -- the named analyst who asked (pcor.analysts), if any
    outcome       VARCHAR NOT NULL DEFAULT 'charged'
                  CHECK (outcome IN ('running', 'answered', 'failed', 'interrupted', 'charged')),
    reason        VARCHAR,
    refunded      BOOLEAN NOT NULL DEFAULT false CHECK (NOT refunded OR outcome IN ('failed', 'interrupted')),
    finished_at   TIMESTAMP,             -- UTC, when the outcome was recorded
    pid           BIGINT,                -- the reserving process (see pcor_sql.ledger.process_identity)
    host          VARCHAR,
    process_token VARCHAR,
    PRIMARY KEY (release_id, unit)
);
-- Reservations and outcomes look rows up by release_id alone, which the two-column key's index
-- does not serve (DuckDB scanned the whole history: 50 ms a request at 1.2M rows, growing with
-- every request a service answers). Ledgers made before get it when next opened writable.
CREATE INDEX IF NOT EXISTS history_release_id ON pcor.history (release_id);

-- The history's hash chain (DESIGN.md §11 "A tamper-evident history"; the rules are in
-- pcor_sql/ledger/history_chain.py): per (unit, notion), one entry per history row written and
-- per later change of its outcome (or refund, or spent_after), and one per repair. Each holds
-- its canonical content, the content's SHA-256, the previous entry's hash and its own.
-- `budget verify` folds the chain and compares it with the history field by field.
CREATE TABLE IF NOT EXISTS pcor.history_chain (
    unit          VARCHAR NOT NULL,
    notion        VARCHAR NOT NULL,
    link          BIGINT NOT NULL,       -- 1, 2, 3, … within (unit, notion)
    kind          VARCHAR NOT NULL,      -- 'charge', 'change', 'migrated', 'rebuilt', 'repair'
    release_id    VARCHAR,               -- the history row's, NULL for a repair
    content       VARCHAR NOT NULL,
    content_hash  VARCHAR NOT NULL,
    prev_hash     VARCHAR NOT NULL,
    entry_hash    VARCHAR NOT NULL,
    recorded_at   TIMESTAMP NOT NULL,    -- UTC
    PRIMARY KEY (unit, notion, link)
);
CREATE INDEX IF NOT EXISTS history_chain_release_id ON pcor.history_chain (release_id);

-- Each chain's head (its last entry), read and written by every append: two writers appending
-- to one chain write one row, so the second is refused and retried (as for pcor.budget).
CREATE TABLE IF NOT EXISTS pcor.chain_heads (
    unit        VARCHAR NOT NULL,
    notion      VARCHAR NOT NULL,
    link        BIGINT NOT NULL,
    head        VARCHAR NOT NULL,
    updated_at  TIMESTAMP NOT NULL,      -- UTC
    PRIMARY KEY (unit, notion)
);

-- The reservations' leases (DESIGN.md §11 "Dead hosts"; the rules are in pcor_sql/ledger/leases.py):
-- one row per reserving process (the holder named by its history rows' host, pid and
-- process_token), renewed by that process while its reservations run. A row still 'running'
-- whose holder has no lease unexpired is marked 'interrupted' by whoever looks next.
CREATE TABLE IF NOT EXISTS pcor.leases (
    host           VARCHAR NOT NULL,
    pid            BIGINT NOT NULL,
    process_token  VARCHAR NOT NULL,
    expires_at     TIMESTAMP NOT NULL,   -- UTC, by the store's clock
    renewed_at     TIMESTAMP NOT NULL,   -- UTC
    PRIMARY KEY (host, pid, process_token)
);

-- Analysts the owner named (DESIGN.md §6 "Analysts and their quotas"). The bearer token is
-- shown once and stored only as its SHA-256 (hex). datasets: the registered datasets they may
-- use (NULL: every one). A revoked analyst's token stops at once.
CREATE TABLE IF NOT EXISTS pcor.analysts (
    name        VARCHAR PRIMARY KEY,
    token_hash  VARCHAR NOT NULL,
    datasets    VARCHAR[],
    created_at  TIMESTAMP NOT NULL,      -- UTC
    revoked_at  TIMESTAMP                -- UTC
);

-- An analyst's quota and spent ε per notion, over all datasets (dataset = '') and per
-- registered dataset. limit_epsilon NULL: no quota (the units' limits still apply). Every
-- charge of an analyst updates its (analyst, notion, '') row, so two concurrent charges of one
-- analyst conflict like two charges of one unit, and a quota is never overspent. Its spent is
-- the sum of epsilon over that analyst's releases (one per release_id) not refunded.
CREATE TABLE IF NOT EXISTS pcor.quotas (
    analyst        VARCHAR NOT NULL,
    notion         VARCHAR NOT NULL CHECK (notion IN ('ocdp', 'dp', 'sp')),
    dataset        VARCHAR NOT NULL DEFAULT '',
    limit_epsilon  DOUBLE CHECK (limit_epsilon IS NULL OR (system.main.isfinite(limit_epsilon) AND limit_epsilon > 0)),
    spent_epsilon  DOUBLE NOT NULL DEFAULT 0 CHECK (system.main.isfinite(spent_epsilon) AND spent_epsilon >= 0),
    spent_residual DOUBLE NOT NULL DEFAULT 0,
    releases       BIGINT NOT NULL DEFAULT 0 CHECK (releases >= 0),
    updated_at     TIMESTAMP NOT NULL,   -- UTC
    PRIMARY KEY (analyst, notion, dataset)
);

-- Datasets the owner registered for analysts: the relation, its record key, the metric
-- columns an analyst may ask about, the context attributes with domains frozen at
-- registration (JSON: attribute → list of values), the units it read then, and an
-- accounting rule the owner fixed (NULL: the analyst may choose).
CREATE TABLE IF NOT EXISTS pcor.datasets (
    name        VARCHAR PRIMARY KEY,
    relation    VARCHAR NOT NULL,
    key_column  VARCHAR NOT NULL,
    metrics     VARCHAR[] NOT NULL,
    attributes  VARCHAR[] NOT NULL,
    domains     VARCHAR NOT NULL,
    units       VARCHAR[] NOT NULL,
    accounting  VARCHAR,
    created_at  TIMESTAMP NOT NULL,
    -- The keys an analyst may ask about by key (canonical text: dataset_registry.releasable_text),
    -- frozen at registration from a list or a predicate; NULL: none declared, so none may be asked.
    releasable  VARCHAR[]
);
