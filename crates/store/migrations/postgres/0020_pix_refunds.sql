-- The money a Pix charge returned (issue "Step 20"): the payment refunded (the charge's own, or a
-- second code's payment for a recharge paid already) and the provider's word on the refund
-- (EM_PROCESSAMENTO until it says DEVOLVIDO or NAO_REALIZADO), read back until it is final.
ALTER TABLE pix_charges ADD COLUMN refunded_end_to_end_id TEXT;
ALTER TABLE pix_charges ADD COLUMN refund_status TEXT;
CREATE INDEX pix_charges_by_conversation ON pix_charges(conversation_id);
