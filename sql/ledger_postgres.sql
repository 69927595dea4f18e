-- The privacy budget ledger of pcor-sql in a PostgreSQL database (DESIGN.md §11 "Two stores,
-- one contract"): the same tables and columns as sql/ledger.sql (whose comments say what each
-- holds), in schema `pcor`, in PostgreSQL's types. pcor_sql.ledger.postgres_store runs this
-- script (idempotent) under an advisory lock, so two services starting at once make it once.
--
-- Every charge runs in a SERIALIZABLE transaction that reads the budget (and quota) rows it
-- writes: of two concurrent charges of one unit, the second to commit fails with SQLSTATE 40001
-- and is run again from a fresh snapshot, where it sees the first's spend — so several services
-- sharing this ledger never overspend a limit or a quota.
--
-- A double is finite and positive when `x > 0 AND x < 'Infinity'` (PostgreSQL orders NaN above
-- every number, so that also refuses NaN).
CREATE SCHEMA IF NOT EXISTS pcor;

CREATE TABLE IF NOT EXISTS pcor.budget (
    unit           text NOT NULL,
    notion         text NOT NULL CHECK (notion IN ('ocdp', 'dp', 'sp')),
    limit_epsilon  double precision CHECK (limit_epsilon IS NULL OR (limit_epsilon > 0 AND limit_epsilon < 'Infinity')),
    spent_epsilon  double precision NOT NULL DEFAULT 0 CHECK (spent_epsilon >= 0 AND spent_epsilon < 'Infinity'),
    spent_residual double precision NOT NULL DEFAULT 0,
    releases       bigint NOT NULL DEFAULT 0 CHECK (releases >= 0),
    created_at     timestamp NOT NULL,  -- UTC
    updated_at     timestamp NOT NULL,  -- UTC
    PRIMARY KEY (unit, notion)
);

CREATE TABLE IF NOT EXISTS pcor.units (
    unit       text PRIMARY KEY,
    public     boolean NOT NULL,
    updated_at timestamp NOT NULL
);

CREATE TABLE IF NOT EXISTS pcor.settings (
    name       text PRIMARY KEY,
    value      double precision,
    updated_at timestamp NOT NULL
);

CREATE TABLE IF NOT EXISTS pcor.history (
    release_id    text NOT NULL,
    unit          text NOT NULL,
    notion        text NOT NULL,
    seq           bigint NOT NULL CHECK (seq >= 1),
    released_at   timestamp NOT NULL,
    mechanism     text NOT NULL,
    epsilon       double precision NOT NULL CHECK (epsilon > 0 AND epsilon < 'Infinity'),
    k             bigint,
    record_key    text,
    statement     text,
    spent_after   double precision NOT NULL,
    seeded        boolean NOT NULL,
    role          text NOT NULL,
    dataset       text,
    analyst       text,
    outcome       text NOT NULL DEFAULT 'charged'
                  CHECK (outcome IN ('running', 'answered', 'failed', 'interrupted', 'charged')),
    reason        text,
    refunded      boolean NOT NULL DEFAULT false CHECK (NOT refunded OR outcome IN ('failed', 'interrupted')),
    finished_at   timestamp,
    pid           bigint,
    host          text,
    process_token text,
    PRIMARY KEY (release_id, unit)
);
CREATE INDEX IF NOT EXISTS history_release_id ON pcor.history (release_id);
CREATE INDEX IF NOT EXISTS history_unit_notion_seq ON pcor.history (unit, notion, seq);

-- Rows still 'running' (a handful at any time) are found through this index: every service's
-- look for rows of lapsed leases reads only them (DESIGN.md §11 "Dead hosts").
CREATE INDEX IF NOT EXISTS history_running ON pcor.history (host, pid, process_token) WHERE outcome = 'running';

-- The history's hash chain and each chain's head (DESIGN.md §11 "A tamper-evident history";
-- sql/ledger.sql says what each holds, pcor_sql/ledger/history_chain.py the rules). Two
-- services appending to one chain in SERIALIZABLE transactions both read its head and write
-- it, and insert one (unit, notion, link) key: the second to commit fails (40001 or 23505) and
-- runs again from a fresh snapshot, after the first's entry — so the chain never forks.
CREATE TABLE IF NOT EXISTS pcor.history_chain (
    unit          text NOT NULL,
    notion        text NOT NULL,
    link          bigint NOT NULL,
    kind          text NOT NULL,
    release_id    text,
    content       text NOT NULL,
    content_hash  text NOT NULL,
    prev_hash     text NOT NULL,
    entry_hash    text NOT NULL,
    recorded_at   timestamp NOT NULL,
    PRIMARY KEY (unit, notion, link)
);
CREATE INDEX IF NOT EXISTS history_chain_release_id ON pcor.history_chain (release_id);

CREATE TABLE IF NOT EXISTS pcor.chain_heads (
    unit        text NOT NULL,
    notion      text NOT NULL,
    link        bigint NOT NULL,
    head        text NOT NULL,
    updated_at  timestamp NOT NULL,
    PRIMARY KEY (unit, notion)
);

-- The reservations' leases (DESIGN.md §11 "Dead hosts"): expiries by the server's clock, so
-- that the hosts' clocks never decide whose lease lapsed.
CREATE TABLE IF NOT EXISTS pcor.leases (
    host           text NOT NULL,
    pid            bigint NOT NULL,
    process_token  text NOT NULL,
    expires_at     timestamp NOT NULL,
    renewed_at     timestamp NOT NULL,
    PRIMARY KEY (host, pid, process_token)
);

CREATE TABLE IF NOT EXISTS pcor.analysts (
    name        text PRIMARY KEY,
    token_hash  text NOT NULL,
    datasets    text[],
    created_at  timestamp NOT NULL,
    revoked_at  timestamp
);

CREATE TABLE IF NOT EXISTS pcor.quotas (
    analyst        text NOT NULL,
    notion         text NOT NULL CHECK (notion IN ('ocdp', 'dp', 'sp')),
    dataset        text NOT NULL DEFAULT '',
    limit_epsilon  double precision CHECK (limit_epsilon IS NULL OR (limit_epsilon > 0 AND limit_epsilon < 'Infinity')),
    spent_epsilon  double precision NOT NULL DEFAULT 0 CHECK (spent_epsilon >= 0 AND spent_epsilon < 'Infinity'),
    spent_residual double precision NOT NULL DEFAULT 0,
    releases       bigint NOT NULL DEFAULT 0 CHECK (releases >= 0),
    updated_at     timestamp NOT NULL,
    PRIMARY KEY (analyst, notion, dataset)
);

CREATE TABLE IF NOT EXISTS pcor.datasets (
    name        text PRIMARY KEY,
    relation    text NOT NULL,
    key_column  text NOT NULL,
    metrics     text[] NOT NULL,
    attributes  text[] NOT NULL,
    domains     text NOT NULL,
    units       text[] NOT NULL,
    accounting  text,
    created_at  timestamp NOT NULL,
    releasable  text[]
);

-- Which ledger this is: a random id made with the tables, which a data file's marker names
-- (DESIGN.md §11 "One data file, one ledger"), whatever URL reaches the server.
CREATE TABLE IF NOT EXISTS pcor.meta (
    name  text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO pcor.meta (name, value) VALUES ('ledger_id', gen_random_uuid()::text) ON CONFLICT (name) DO NOTHING;
