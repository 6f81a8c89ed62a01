-- What each turn cost (issue "Step 22"): its tenant (kept with the figure, which outlives the
-- conversation under [retencao]) and its cost in millionths of a real at the [custos] prices of the
-- day it ran; NULL when a price was missing (unknown, never zero).
ALTER TABLE usage_metrics ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE usage_metrics ADD COLUMN custo_micro_brl BIGINT;
