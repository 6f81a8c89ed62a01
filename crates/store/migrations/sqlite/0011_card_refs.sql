-- The blind index of cards (issue "Step 12"): which conversations and flow runs hold a card, by a keyed
-- hash of its number (the key is the store's index key, sealed in store_secrets). Erasing or exporting
-- "everything about this card" reads it; nothing here shows a card.
CREATE TABLE card_refs (
    card_hash  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    ref_id     TEXT NOT NULL,
    PRIMARY KEY (card_hash, kind, ref_id)
);
CREATE INDEX idx_card_refs_ref ON card_refs(ref_id);
-- A flow run's card, by the same keyed hash, and its conversation: written with the run as it starts,
-- so a run a kill interrupted is found by its card too.
ALTER TABLE flow_runs ADD COLUMN card_hash TEXT;
ALTER TABLE flow_runs ADD COLUMN conversation_id TEXT;
CREATE INDEX idx_flow_runs_card ON flow_runs(card_hash);
