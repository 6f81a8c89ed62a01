-- The pace of what goes out (issue "Step 36"): per sending number (WhatsApp's messages per second) and per
-- person (its pair rate), shared by every instance on the database. Each key keeps its theoretical
-- arrival time in microseconds since the epoch (the generic cell rate algorithm): a send takes slots
-- only when the first is near, so a deferred item holds none. Unlogged: a crash loses at most a second of pace.
CREATE UNLOGGED TABLE send_pacing (
    key TEXT PRIMARY KEY,
    tat_us BIGINT NOT NULL
);
