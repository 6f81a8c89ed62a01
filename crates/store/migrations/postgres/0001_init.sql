-- vt-agent schema, PostgreSQL.

CREATE TABLE conversations (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    user_login    TEXT NOT NULL,
    channel       TEXT NOT NULL,
    active_skill  TEXT NOT NULL,
    state         JSONB NOT NULL DEFAULT '{}',
    memory        JSONB NOT NULL DEFAULT '{}',
    skill_window  JSONB NOT NULL DEFAULT '[]',
    handoff       JSONB,
    ended         BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

CREATE TABLE messages (
    id               BIGSERIAL PRIMARY KEY,
    conversation_id  TEXT NOT NULL,
    execucao_id      TEXT,
    role             TEXT NOT NULL,
    body             JSONB NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_messages_conversation ON messages(conversation_id, id);

CREATE TABLE executions (
    execucao_id      TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL,
    agent_id         TEXT NOT NULL,
    status           TEXT NOT NULL,
    error            TEXT,
    model_calls      JSONB NOT NULL DEFAULT '[]',
    events           JSONB NOT NULL DEFAULT '[]',
    tokens_input     BIGINT NOT NULL DEFAULT 0,
    tokens_output    BIGINT NOT NULL DEFAULT 0,
    started_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_executions_conversation ON executions(conversation_id);

CREATE TABLE flow_runs (
    execucao_id  TEXT PRIMARY KEY,
    status       TEXT NOT NULL,
    input        JSONB NOT NULL,
    output       JSONB NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);

CREATE TABLE flow_stages (
    execucao_id  TEXT NOT NULL,
    position     INTEGER NOT NULL,
    etapa        TEXT NOT NULL,
    saida        JSONB NOT NULL,
    PRIMARY KEY (execucao_id, position)
);

CREATE TABLE task_runs (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    intent_key       TEXT NOT NULL,
    status           TEXT NOT NULL,
    plan             JSONB,
    steps            JSONB NOT NULL DEFAULT '[]',
    final_result     TEXT,
    tokens_used      BIGINT NOT NULL DEFAULT 0,
    error_message    TEXT,
    created_at       TIMESTAMPTZ NOT NULL,
    completed_at     TIMESTAMPTZ
);
CREATE INDEX idx_task_runs_conversation ON task_runs(conversation_id);
CREATE INDEX idx_task_runs_status ON task_runs(status);

CREATE TABLE usage_metrics (
    id                   BIGSERIAL PRIMARY KEY,
    conversation_id      TEXT NOT NULL,
    intent_key           TEXT NOT NULL,
    action_type          TEXT NOT NULL,
    tokens_input         BIGINT NOT NULL,
    tokens_output        BIGINT NOT NULL,
    execution_time_ms    BIGINT NOT NULL,
    was_keyword_matched  BOOLEAN NOT NULL,
    created_at           TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_usage_created ON usage_metrics(created_at);

CREATE VIEW usage_summary_7d AS
SELECT intent_key,
       action_type,
       COUNT(*)::BIGINT                                                    AS turns,
       SUM(tokens_input)::BIGINT                                           AS tokens_input,
       SUM(tokens_output)::BIGINT                                          AS tokens_output,
       SUM(CASE WHEN tokens_input + tokens_output = 0 THEN 1 ELSE 0 END)::BIGINT AS zero_token_turns,
       SUM(CASE WHEN was_keyword_matched THEN 1 ELSE 0 END)::BIGINT        AS keyword_matched,
       AVG(execution_time_ms)::DOUBLE PRECISION                           AS mean_time_ms
FROM usage_metrics
WHERE created_at >= now() - INTERVAL '7 days'
GROUP BY intent_key, action_type;

CREATE TABLE conversation_context (
    conversation_id  TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL,
    summary          TEXT,
    key_facts        JSONB NOT NULL DEFAULT '[]',
    last_intent      TEXT,
    turn_count       INTEGER NOT NULL DEFAULT 0,
    updated_at       TIMESTAMPTZ NOT NULL
);

CREATE TABLE intent_actions (
    intent_key       TEXT PRIMARY KEY,
    description      TEXT NOT NULL,
    action_type      TEXT NOT NULL,
    required_params  JSONB NOT NULL DEFAULT '[]',
    optional_params  JSONB NOT NULL DEFAULT '[]',
    prompt_template  TEXT,
    max_tokens       INTEGER NOT NULL DEFAULT 500,
    is_active        BOOLEAN NOT NULL DEFAULT TRUE,
    created_at       TIMESTAMPTZ NOT NULL
);

CREATE TABLE idempotency_records (
    key           TEXT PRIMARY KEY,
    scope         TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    response      JSONB NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL
);

CREATE TABLE outbox (
    id               BIGSERIAL PRIMARY KEY,
    kind             TEXT NOT NULL,
    destination      TEXT NOT NULL,
    payload          JSONB NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending',
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    claimed_until    TIMESTAMPTZ,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_outbox_due ON outbox(status, next_attempt_at);
