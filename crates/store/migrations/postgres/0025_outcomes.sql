-- How conversations end (issue "Step 22"). Each turn keeps what it achieved (`marcas`: a balance read,
-- a recharge credited, a recharge left waiting for its "sim", a question of ours, the chat ended), and
-- each stretch of a conversation that went quiet or ended gets one outcome, computed by code from
-- those marks, its case and its Pix charges. The figures outlive the conversation (erasure unties
-- them from it, like the usage figures).
ALTER TABLE usage_metrics ADD COLUMN marcas TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_usage_metrics_conversation ON usage_metrics(conversation_id, created_at);
CREATE INDEX idx_conversations_updated ON conversations(updated_at);

CREATE TABLE desfechos (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL,
    tenant_id        TEXT NOT NULL,
    channel          TEXT NOT NULL,
    -- The stretch: after the previous outcome's end (NULL: the conversation's start) up to `ate`,
    -- the conversation's last activity.
    desde            TIMESTAMPTZ,
    ate              TIMESTAMPTZ NOT NULL,
    -- resolvida_pelo_bot, resolvida_por_pessoa, abandonada, sem_objetivo
    desfecho         TEXT NOT NULL,
    intencao         TEXT NOT NULL,
    -- What the person came for (saldo, recarga…): "the same subject" of a return.
    assunto          TEXT NOT NULL,
    caso_id          TEXT,
    -- Turns and paid messages of the stretch, in millionths of a real; NULL: a price was missing.
    custo_micro_brl  BIGINT,
    -- The same person came back on the same subject within 7 days (set on this, the earlier one).
    reaberta         BOOLEAN NOT NULL DEFAULT FALSE,
    -- The earlier outcome this stretch reopened.
    reabre           TEXT,
    -- The satisfaction question: when it went, and the 1–5 answer.
    pesquisa_em      TIMESTAMPTZ,
    nota             INTEGER,
    nota_em          TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (conversation_id, ate)
);
CREATE INDEX idx_desfechos_ate ON desfechos(ate);
CREATE INDEX idx_desfechos_conversation ON desfechos(conversation_id, ate);

-- A paid message that was a flow's notice (RF5/RF10 told on WhatsApp) names its run: what a flow run
-- cost is what its notices cost (a flow calls no model).
ALTER TABLE message_costs ADD COLUMN execucao_id TEXT;
CREATE INDEX idx_message_costs_execucao ON message_costs(execucao_id) WHERE execucao_id IS NOT NULL;
