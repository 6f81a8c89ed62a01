-- Pix charges of chat recharges (issue "Step 20"): the code a card holder pays, and the recharge to
-- send once they have (request, sealed). A recharge may have several codes (n = 0, 1, … — a new one
-- when the last expired); the unique index lets at most one of them hold a payment, whichever process
-- claims it first: one payment, one recharge.
CREATE TABLE pix_charges (
    txid TEXT PRIMARY KEY,
    recharge_key TEXT NOT NULL,
    n BIGINT NOT NULL,
    conversation_id TEXT NOT NULL,
    request JSONB NOT NULL,
    amount TEXT NOT NULL,
    copia_e_cola TEXT NOT NULL,
    -- ativa, paga, creditada, devolvida, expirada
    status TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    end_to_end_id TEXT UNIQUE,
    paid_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (recharge_key, n)
);
CREATE UNIQUE INDEX pix_charges_one_paid_per_recharge ON pix_charges(recharge_key) WHERE end_to_end_id IS NOT NULL;
CREATE INDEX pix_charges_by_status ON pix_charges(status, expires_at);
