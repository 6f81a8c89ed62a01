-- Recharges that happen by themselves (issue "Step 29"): a Pix Automático recurrence the card holder
-- authorised in their bank (the provider's idRec once created; our id is the contract it carries), its
-- terms (below a threshold, or on a day of the month) and the recharge to send (request, sealed).
CREATE TABLE recurrences (
    id TEXT PRIMARY KEY,
    id_rec TEXT UNIQUE,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    card_index TEXT NOT NULL,
    card_masked TEXT NOT NULL,
    request TEXT NOT NULL,
    -- limite | dia
    kind TEXT NOT NULL,
    threshold TEXT,
    day_of_month INTEGER,
    amount TEXT NOT NULL,
    periodicidade TEXT NOT NULL,
    -- criada, aprovada, rejeitada, expirada, cancelada, falhou (never created at the provider)
    status TEXT NOT NULL,
    location TEXT,
    copia_e_cola TEXT,
    -- The local day a threshold recurrence's balance was last read: once a day.
    checked_on TEXT,
    last_outcome TEXT,
    created_at INTEGER NOT NULL,
    approved_at INTEGER,
    ended_at INTEGER
);
CREATE INDEX recurrences_by_status ON recurrences(status);
CREATE INDEX recurrences_by_user ON recurrences(tenant_id, user_id);

-- One charge per cycle and card (the unique key), whichever recurrence, instance or run asks first; its
-- txid comes from the recurrence and the cycle, so a retry asks the provider for the same charge.
CREATE TABLE recurrence_charges (
    txid TEXT PRIMARY KEY,
    recurrence_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    card_index TEXT NOT NULL,
    cycle TEXT NOT NULL,
    due_on TEXT NOT NULL,
    amount TEXT NOT NULL,
    -- nova, agendada, paga, creditada, enviada, devolvida, falhou, cancelada
    status TEXT NOT NULL,
    retries INTEGER NOT NULL DEFAULT 0,
    funds_told INTEGER NOT NULL DEFAULT 0,
    end_to_end_id TEXT UNIQUE,
    paid_at INTEGER,
    created_at INTEGER NOT NULL,
    UNIQUE (tenant_id, card_index, cycle)
);
CREATE INDEX recurrence_charges_by_status ON recurrence_charges(status);
CREATE INDEX recurrence_charges_by_recurrence ON recurrence_charges(recurrence_id);
