-- The message pipeline (issue "Step 7"): conversations belong to a tenant, inbound messages carry the
-- channel's own id (deduplicated), outbox items belong to a conversation (delivered in order), flow
-- runs started by a chat tool point at the turn that started them.

ALTER TABLE conversations ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';

ALTER TABLE messages ADD COLUMN channel_message_id TEXT;
CREATE UNIQUE INDEX idx_messages_channel_id ON messages(conversation_id, channel_message_id)
    WHERE channel_message_id IS NOT NULL;

ALTER TABLE outbox ADD COLUMN conversation_id TEXT;
CREATE INDEX idx_outbox_conversation ON outbox(conversation_id, id);

ALTER TABLE flow_runs ADD COLUMN parent_execucao_id TEXT;
