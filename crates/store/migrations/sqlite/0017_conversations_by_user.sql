-- A person's last conversation on a channel, for the cards it remembers (carried to their next one).
CREATE INDEX conversations_by_user ON conversations (tenant_id, channel, user_id, updated_at);
