-- What a business may send on WhatsApp, and when (issue "Step 15"): the time of each user's last
-- message (the 24-hour window is counted from it), and each template's state as Meta reports it.
CREATE TABLE whatsapp_contacts (
    wa_id TEXT PRIMARY KEY,
    last_inbound_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE whatsapp_templates (
    name TEXT NOT NULL,
    language TEXT NOT NULL,
    -- APPROVED, PAUSED, DISABLED, REJECTED, REINSTATED… (NULL: never reported).
    status TEXT,
    category TEXT,
    reason TEXT,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (name, language)
);

-- Consent to business-initiated messages (notices, templates): each user's current answer, and every
-- change with who made it, when and through what ("PARAR" in a chat, a company's import…).
CREATE TABLE whatsapp_consent (
    wa_id TEXT PRIMARY KEY,
    opted_in BOOLEAN NOT NULL,
    source TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL
);
CREATE TABLE whatsapp_consent_events (
    seq BIGSERIAL PRIMARY KEY,
    wa_id TEXT NOT NULL,
    opted_in BOOLEAN NOT NULL,
    source TEXT NOT NULL,
    who TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL
);
CREATE INDEX whatsapp_consent_events_by_user ON whatsapp_consent_events (wa_id, seq);

-- Low-balance notices the product sends itself: one per card per crossing of the limit ("below" until
-- a reading above it), and at most one per [notificacoes] intervalo_minimo_horas. By the card's keyed
-- hash, never the card.
CREATE TABLE low_balance_notices (
    card_hash TEXT PRIMARY KEY,
    below BOOLEAN NOT NULL,
    last_notice_at TIMESTAMPTZ
);
