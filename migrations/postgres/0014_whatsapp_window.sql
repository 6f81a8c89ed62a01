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
