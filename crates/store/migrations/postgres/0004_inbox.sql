-- Messages a channel delivered and we acknowledged before processing them (webhooks answer at once):
-- `processed` is false until the turn that handles the message commits, so a process that dies in
-- between leaves them to be processed again at start.
ALTER TABLE messages ADD COLUMN processed BOOLEAN NOT NULL DEFAULT TRUE;
CREATE INDEX idx_messages_unprocessed ON messages(processed) WHERE NOT processed;
