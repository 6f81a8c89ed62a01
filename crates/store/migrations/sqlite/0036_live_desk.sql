-- A desk that is alive (issue "Step 37"): answers an administrator keeps for the agents to insert with
-- `/` and a shortcut (per tenant, for one team or all), and how a case was resolved when a person
-- closed it (a category from the product's list; its note is the close line's, sealed, in the log).
CREATE TABLE canned_answers (
    tenant_id TEXT NOT NULL,
    shortcut TEXT NOT NULL,
    -- The team it is for; '' for every team.
    team TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, shortcut)
);
ALTER TABLE cases ADD COLUMN resolution TEXT;
-- The month's report counts lines of one kind (answers inserted, notes); the live desk reads the log
-- by its sequence (its primary key).
CREATE INDEX case_events_by_what ON case_events (what, at);
