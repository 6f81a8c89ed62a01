-- Batch jobs shared by every `serve` instance (issue "Step 16"): a job's lines in fixed chunks, each
-- taken by one instance at a time under a lease it renews while it runs them; a chunk is done once its
-- lines are recorded. An instance that dies leaves its chunk to the next once the lease runs out; the
-- lines it recorded are skipped, the others run again with the same recharge keys.
CREATE TABLE batch_chunks (
    job_id TEXT NOT NULL,
    chunk INTEGER NOT NULL,
    owner TEXT,
    -- Leased until then; for a chunk given back unfinished, not taken again before then.
    leased_until TIMESTAMPTZ,
    done BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (job_id, chunk)
);
