-- One message, one id (issue "Step 32"): a late message's outbox item names the stored message it
-- carries, so a webhook, the event stream and GET /v1/conversations/{id} give it the same id, time and
-- role. NULL for items that carry no message of the conversation (a board's line, a flow's notice).
ALTER TABLE outbox ADD COLUMN message_id INTEGER;
