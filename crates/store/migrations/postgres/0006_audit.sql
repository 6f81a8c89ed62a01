-- Every card a support agent looked up: who, when, the masked card plus a keyed hash of it (to find
-- every lookup of one card without keeping the number), and the outcome.
CREATE TABLE support_audit (
    id            BIGSERIAL PRIMARY KEY,
    at            TIMESTAMPTZ NOT NULL,
    support_user  TEXT NOT NULL,
    tenant_id     TEXT NOT NULL,
    channel       TEXT NOT NULL,
    cartao        TEXT NOT NULL,
    cartao_hash   TEXT NOT NULL,
    outcome       TEXT NOT NULL
);
CREATE INDEX idx_support_audit_at ON support_audit(at);
