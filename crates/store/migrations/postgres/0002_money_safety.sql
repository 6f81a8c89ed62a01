-- Money safety (issue "Step 6"): turn leases across processes, confirmations consumed once, recharge
-- attempts on record before they are sent, flow runs on record before they run.

-- One row while a turn of the conversation runs; a process that dies leaves it to expire.
CREATE TABLE conversation_leases (
    conversation_id  TEXT PRIMARY KEY,
    owner            TEXT NOT NULL,
    expires_at       TIMESTAMPTZ NOT NULL
);

-- A pending recharge confirmation, once used, is here: a second use finds the row.
CREATE TABLE consumed_confirmations (
    pending_id   TEXT PRIMARY KEY,
    origin       TEXT NOT NULL,
    consumed_at  TIMESTAMPTZ NOT NULL
);

-- Every recharge sent, written before it is sent. No card number: the masked card, and the PRD key of
-- (card, value, currency) as the fingerprint of identical requests.
CREATE TABLE recharge_attempts (
    idempotency_key   TEXT PRIMARY KEY,
    fingerprint       TEXT NOT NULL,
    scope             TEXT NOT NULL,
    origin            TEXT NOT NULL,
    execucao_id       TEXT NOT NULL,
    cartao_mascarado  TEXT NOT NULL,
    valor             TEXT NOT NULL,
    moeda             TEXT NOT NULL,
    status            TEXT NOT NULL,
    sends             INTEGER NOT NULL DEFAULT 1,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_recharge_attempts_twin ON recharge_attempts(scope, fingerprint, status);
CREATE INDEX idx_recharge_attempts_execucao ON recharge_attempts(execucao_id);

ALTER TABLE flow_runs ADD COLUMN finished_at TIMESTAMPTZ;
CREATE INDEX idx_flow_runs_created ON flow_runs(created_at);
