-- Prompt caching (issue "Step 22"): of a turn's input tokens, those the provider read from its prompt
-- cache, counted apart (they cost less); the 7-day summary shows them.
ALTER TABLE usage_metrics ADD COLUMN tokens_cached BIGINT NOT NULL DEFAULT 0;

DROP VIEW usage_summary_7d;
CREATE VIEW usage_summary_7d AS
SELECT intent_key,
       action_type,
       COUNT(*)::BIGINT                                                    AS turns,
       SUM(tokens_input)::BIGINT                                           AS tokens_input,
       SUM(tokens_output)::BIGINT                                          AS tokens_output,
       SUM(CASE WHEN tokens_input + tokens_output = 0 THEN 1 ELSE 0 END)::BIGINT AS zero_token_turns,
       SUM(CASE WHEN was_keyword_matched THEN 1 ELSE 0 END)::BIGINT        AS keyword_matched,
       AVG(execution_time_ms)::DOUBLE PRECISION                           AS mean_time_ms,
       SUM(tokens_cached)::BIGINT                                          AS tokens_cached
FROM usage_metrics
WHERE created_at >= now() - INTERVAL '7 days'
GROUP BY intent_key, action_type;
