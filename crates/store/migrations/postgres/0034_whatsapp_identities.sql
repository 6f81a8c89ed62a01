-- Who a WhatsApp person is (issue "Step 36"): Meta names a person by their phone (wa_id), by their
-- business-scoped user id (BSUID, `CC.…`), or by both; a username adopter may come with the BSUID only,
-- and a new phone number brings a new BSUID (`user_id_update`). Each identifier seen on a business
-- number points at the person's key — the first identifier seen, the user id of their conversation —
-- so one conversation continues whichever arrives. A retired identifier is no longer theirs.
CREATE TABLE whatsapp_identities (
    phone_number_id TEXT NOT NULL,
    identifier TEXT NOT NULL,
    -- 'telefone' or 'bsuid'.
    kind TEXT NOT NULL,
    person TEXT NOT NULL,
    seen_at TIMESTAMPTZ NOT NULL,
    retired_at TIMESTAMPTZ,
    PRIMARY KEY (phone_number_id, identifier)
);
CREATE INDEX whatsapp_identities_by_person ON whatsapp_identities (phone_number_id, person);
