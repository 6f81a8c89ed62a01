-- A confirmation is consumed by one stored user message, in the same transaction that puts its
-- recharge attempt on record (issue "Step 12"): that message, processed again after its process died,
-- carries the attempt on under the same key; any other message is told it was confirmed already.
-- NULL for confirmations consumed before this column existed (they count as another message's).
ALTER TABLE consumed_confirmations ADD COLUMN consumer TEXT;
