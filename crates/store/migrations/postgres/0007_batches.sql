-- Batch jobs (`vt-agent batch`, `POST /v1/batches`): one row a job, one row per input line that ended.
-- A rerun of the job skips the lines recorded here; the digest of the input refuses a rerun of the same
-- id with other content (its lines' recharge keys would name other requests).
CREATE TABLE batch_jobs (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    digest       TEXT NOT NULL,
    total        BIGINT NOT NULL,
    dry_run      BOOLEAN NOT NULL,
    -- The input itself, for jobs sent over HTTP (resumed by `serve` after a restart); NULL otherwise.
    source       TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ
);

CREATE TABLE batch_lines (
    job_id       TEXT NOT NULL REFERENCES batch_jobs(id),
    line         BIGINT NOT NULL,
    status       TEXT NOT NULL,
    result       JSONB NOT NULL,
    finished_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job_id, line)
);
