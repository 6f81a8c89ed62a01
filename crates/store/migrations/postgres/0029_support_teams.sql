-- A support team, not a support person (issue "Step 28"): every case has a protocol number said to the
-- card holder (AAAAMMDD-NNNNNN, counted per tenant and local day), the team it is queued for, the
-- handoff reason from the fixed list, and the agent it is offered to until a deadline.
ALTER TABLE cases ADD COLUMN protocol TEXT;
ALTER TABLE cases ADD COLUMN team TEXT NOT NULL DEFAULT 'atendimento';
ALTER TABLE cases ADD COLUMN motivo TEXT NOT NULL DEFAULT 'pedido_do_cliente';
ALTER TABLE cases ADD COLUMN offered_to TEXT;
ALTER TABLE cases ADD COLUMN offer_due_at TIMESTAMPTZ;
-- The last SLA warning sent for the case (its clock and cycle): one ping per clock at risk.
ALTER TABLE cases ADD COLUMN sla_warned TEXT;
CREATE UNIQUE INDEX cases_protocol ON cases (tenant_id, protocol) WHERE protocol IS NOT NULL;
CREATE INDEX cases_by_team ON cases (team, state);

-- The last protocol number of a tenant's day: taken by one upsert, so two instances never share one.
CREATE TABLE case_protocols (
    tenant_id TEXT NOT NULL,
    day TEXT NOT NULL,
    last BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, day)
);

-- Support agents who said they are away (the console, /vt ausente): no case is offered to them.
CREATE TABLE agent_presence (
    login TEXT PRIMARY KEY,
    away BOOLEAN NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL
);

-- A round-robin team's last agent offered a case.
CREATE TABLE team_turns (
    team TEXT PRIMARY KEY,
    last_agent TEXT NOT NULL
);
-- The runs a chat turn's tools started, read by the console's payment panels.
CREATE INDEX flow_runs_by_parent ON flow_runs (parent_execucao_id) WHERE parent_execucao_id IS NOT NULL;
