-- A transfer to a person opens a case (issue "Step 14"): who has the conversation, since when, and what
-- happened to it. At most one open case per conversation: the partial unique index says so.
CREATE TABLE cases (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    -- Sealed: the reason may quote the card holder.
    reason TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT,
    opened_at INTEGER NOT NULL,
    claimed_at INTEGER,
    closed_at INTEGER,
    -- The first message while the case waits got its one acknowledgement.
    acknowledged BOOLEAN NOT NULL DEFAULT FALSE,
    -- Sealed JSON: the case file built by code when the case opened.
    case_file TEXT NOT NULL,
    -- A case nobody claims in time gets one notice: when it is due (in the row, so a restart loses no
    -- deadline), and whether it went.
    notice_due_at INTEGER,
    noticed BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE UNIQUE INDEX cases_one_open ON cases (conversation_id) WHERE state IN ('aguardando', 'em_atendimento');
CREATE INDEX cases_by_tenant ON cases (tenant_id, state);
CREATE INDEX cases_due_notices ON cases (notice_due_at) WHERE state = 'aguardando' AND NOT noticed;

-- Who did what to a case, and when.
CREATE TABLE case_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    case_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    who TEXT NOT NULL,
    what TEXT NOT NULL,
    -- Sealed: a note, or the text relayed.
    detail TEXT
);
CREATE INDEX case_events_by_case ON case_events (case_id, at);
