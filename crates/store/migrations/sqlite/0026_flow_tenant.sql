-- What a flow run costs, per tenant (issue "Step 22"): a run keeps the tenant its input named, so the
-- cost per flow can be told per day and tenant (`vt-agent usage --custos`, `/metrics`). Runs written
-- before this have none and are counted under no tenant.
ALTER TABLE flow_runs ADD COLUMN tenant_id TEXT;
