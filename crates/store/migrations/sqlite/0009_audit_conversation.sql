-- The audit line names the conversation it is about (issue "Step 12"): a support lookup's, or the
-- conversation whose transcript the console handed out.
ALTER TABLE support_audit ADD COLUMN conversation_id TEXT;
