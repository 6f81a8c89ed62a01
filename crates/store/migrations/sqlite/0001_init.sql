-- vt-agent schema, SQLite. Times are Unix epoch milliseconds (INTEGER); JSON is TEXT.

CREATE TABLE conversations (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    user_login    TEXT NOT NULL,
    channel       TEXT NOT NULL,
    active_skill  TEXT NOT NULL,
    state         TEXT NOT NULL DEFAULT '{}',
    memory        TEXT NOT NULL DEFAULT '{}',
    skill_window  TEXT NOT NULL DEFAULT '[]',
    handoff       TEXT,
    ended         INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE messages (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id  TEXT NOT NULL,
    execucao_id      TEXT,
    role             TEXT NOT NULL,
    body             TEXT NOT NULL,
    created_at       INTEGER NOT NULL
);
CREATE INDEX idx_messages_conversation ON messages(conversation_id, id);

CREATE TABLE executions (
    execucao_id      TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL,
    agent_id         TEXT NOT NULL,
    status           TEXT NOT NULL,
    error            TEXT,
    model_calls      TEXT NOT NULL DEFAULT '[]',
    events           TEXT NOT NULL DEFAULT '[]',
    tokens_input     INTEGER NOT NULL DEFAULT 0,
    tokens_output    INTEGER NOT NULL DEFAULT 0,
    started_at       INTEGER NOT NULL,
    finished_at      INTEGER NOT NULL
);
CREATE INDEX idx_executions_conversation ON executions(conversation_id);

CREATE TABLE flow_runs (
    execucao_id  TEXT PRIMARY KEY,
    status       TEXT NOT NULL,
    input        TEXT NOT NULL,
    output       TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);

CREATE TABLE flow_stages (
    execucao_id  TEXT NOT NULL,
    position     INTEGER NOT NULL,
    etapa        TEXT NOT NULL,
    saida        TEXT NOT NULL,
    PRIMARY KEY (execucao_id, position)
);

CREATE TABLE task_runs (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    intent_key       TEXT NOT NULL,
    status           TEXT NOT NULL,
    plan             TEXT,
    steps            TEXT NOT NULL DEFAULT '[]',
    final_result     TEXT,
    tokens_used      INTEGER NOT NULL DEFAULT 0,
    error_message    TEXT,
    created_at       INTEGER NOT NULL,
    completed_at     INTEGER
);
CREATE INDEX idx_task_runs_conversation ON task_runs(conversation_id);
CREATE INDEX idx_task_runs_status ON task_runs(status);

CREATE TABLE usage_metrics (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id      TEXT NOT NULL,
    intent_key           TEXT NOT NULL,
    action_type          TEXT NOT NULL,
    tokens_input         INTEGER NOT NULL,
    tokens_output        INTEGER NOT NULL,
    execution_time_ms    INTEGER NOT NULL,
    was_keyword_matched  INTEGER NOT NULL,
    created_at           INTEGER NOT NULL
);
CREATE INDEX idx_usage_created ON usage_metrics(created_at);

CREATE VIEW usage_summary_7d AS
SELECT intent_key,
       action_type,
       COUNT(*)                                                       AS turns,
       SUM(tokens_input)                                              AS tokens_input,
       SUM(tokens_output)                                             AS tokens_output,
       SUM(CASE WHEN tokens_input + tokens_output = 0 THEN 1 ELSE 0 END) AS zero_token_turns,
       SUM(was_keyword_matched)                                       AS keyword_matched,
       AVG(execution_time_ms)                                         AS mean_time_ms
FROM usage_metrics
WHERE created_at >= (CAST(strftime('%s', 'now') AS INTEGER) - 7 * 86400) * 1000
GROUP BY intent_key, action_type;

CREATE TABLE conversation_context (
    conversation_id  TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL,
    summary          TEXT,
    key_facts        TEXT NOT NULL DEFAULT '[]',
    last_intent      TEXT,
    turn_count       INTEGER NOT NULL DEFAULT 0,
    updated_at       INTEGER NOT NULL
);

CREATE TABLE intent_actions (
    intent_key       TEXT PRIMARY KEY,
    description      TEXT NOT NULL,
    action_type      TEXT NOT NULL,
    required_params  TEXT NOT NULL DEFAULT '[]',
    optional_params  TEXT NOT NULL DEFAULT '[]',
    prompt_template  TEXT,
    max_tokens       INTEGER NOT NULL DEFAULT 500,
    is_active        INTEGER NOT NULL DEFAULT 1,
    created_at       INTEGER NOT NULL
);

CREATE TABLE idempotency_records (
    key           TEXT PRIMARY KEY,
    scope         TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    response      TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);

CREATE TABLE outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT NOT NULL,
    destination      TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending',
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    next_attempt_at  INTEGER NOT NULL,
    claimed_until    INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL
);
CREATE INDEX idx_outbox_due ON outbox(status, next_attempt_at);
