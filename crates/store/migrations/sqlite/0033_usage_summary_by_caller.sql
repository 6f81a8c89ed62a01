-- The 7-day usage summary is counted from the caller's clock (the service's, which tests move), by a
-- query with its own bound start: the view that read the database's clock goes.
DROP VIEW usage_summary_7d;
