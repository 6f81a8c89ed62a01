-- A case nobody claims in time gets one notice to the card holder (issue "Step 14"): when it is due,
-- and whether it went. The due time lives in the row, so a restart loses no deadline.
ALTER TABLE cases ADD COLUMN notice_due_at TIMESTAMPTZ;
ALTER TABLE cases ADD COLUMN noticed BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX cases_due_notices ON cases (notice_due_at) WHERE state = 'aguardando' AND NOT noticed;
