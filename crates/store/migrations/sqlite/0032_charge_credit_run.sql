-- What a paid charge did after the conversation (issue "Step 32"): the flow run that sent its recharge,
-- so a replay lists that recharge among the conversation's effects, in the order it happened.
ALTER TABLE pix_charges ADD COLUMN execucao_id TEXT;
