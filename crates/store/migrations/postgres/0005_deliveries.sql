-- What a channel said about our outbound messages: the id it gave the message when it took it, and the
-- statuses it reported later (sent, delivered, read, failed with its error code).
ALTER TABLE outbox ADD COLUMN external_id TEXT;
CREATE INDEX idx_outbox_external ON outbox(external_id);

CREATE TABLE delivery_statuses (
    external_id  TEXT NOT NULL,
    status       TEXT NOT NULL,
    error_code   TEXT,
    at           TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (external_id, status)
);
