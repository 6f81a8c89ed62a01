-- Recharges whose outcome came late (issue "Step 15"): one follow-up per recharge attempt, written
-- with the attempt before it is sent. While the outcome is unknown it keeps the request itself,
-- sealed (the payment token's value is in its body), so the same request can be sent again under the
-- same key; once the outcome is known — or a person has it — the request is dropped and the row says
-- what became of it and when.
CREATE TABLE recharge_followups (
    idempotency_key TEXT PRIMARY KEY,
    request TEXT,
    checks INTEGER NOT NULL DEFAULT 0,
    next_check_at TIMESTAMPTZ NOT NULL,
    deadline_at TIMESTAMPTZ NOT NULL,
    leased_until TIMESTAMPTZ,
    -- aprovada, negada, erro (the system said), caso (a person has it); NULL while unknown.
    outcome TEXT,
    settled_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_recharge_followups_due ON recharge_followups(next_check_at) WHERE settled_at IS NULL;
