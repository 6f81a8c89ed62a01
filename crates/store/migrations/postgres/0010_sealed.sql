-- Sealed at rest (issue "Step 12"): values encrypted under the data key. Secrets the store keeps for
-- itself (the index key of the blind indexes and the payment tokens' fingerprints), sealed too, and the
-- mark that every older row was sealed.
CREATE TABLE store_secrets (
    name   TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
-- A message's text with cards masked and secrets out: what the console searches, since the body is
-- sealed.
ALTER TABLE messages ADD COLUMN search_text TEXT;
