-- What the channel's paid messages cost (issue "Step 22"): a WhatsApp template sent outside the
-- 24-hour window, at its category's [custos] price the moment it went out, in millionths of a real;
-- NULL when the category has no price (unknown, never zero). Kept like the usage figures: the money
-- trail outlives the conversation.
CREATE TABLE message_costs (
    id               BIGSERIAL PRIMARY KEY,
    tenant_id        TEXT NOT NULL,
    conversation_id  TEXT,
    channel          TEXT NOT NULL,
    category         TEXT NOT NULL,
    custo_micro_brl  BIGINT,
    created_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_message_costs_created ON message_costs(created_at);
