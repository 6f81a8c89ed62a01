-- Prompt caching (issue "Step 22"): of a turn's input tokens, those the provider read from its prompt
-- cache, counted apart (they cost less); the 7-day summary shows them.
ALTER TABLE usage_metrics ADD COLUMN tokens_cached BIGINT NOT NULL DEFAULT 0;

DROP VIEW usage_summary_7d;
CREATE VIEW usage_summary_7d AS
SELECT intent_key,
       action_type,
       COUNT(*)                                                       AS turns,
       SUM(tokens_input)                                              AS tokens_input,
       SUM(tokens_output)                                             AS tokens_output,
       SUM(CASE WHEN tokens_input + tokens_output = 0 THEN 1 ELSE 0 END) AS zero_token_turns,
       SUM(was_keyword_matched)                                       AS keyword_matched,
       AVG(execution_time_ms)                                         AS mean_time_ms,
       SUM(tokens_cached)                                             AS tokens_cached
FROM usage_metrics
WHERE created_at >= (CAST(strftime('%s', 'now') AS INTEGER) - 7 * 86400) * 1000
GROUP BY intent_key, action_type;
