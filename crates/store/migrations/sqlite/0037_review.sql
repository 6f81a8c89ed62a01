-- Improving the answers (issue "Step 38"): the review queue — a bot message a support agent flagged,
-- or one the product put there itself (a low score, a case reopened or opened right after it, the
-- assistant's limit) — with what a reviewer labelled and expected, and the test written from it; and
-- what administrators decided about the FAQ entries suggested from the agents' own answers.
CREATE TABLE review_items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    -- The bot message under review (the stored message's id).
    message_id BIGINT NOT NULL,
    -- Who put it here: 'sinalizada' (a support agent) or the product's own reason.
    source TEXT NOT NULL,
    -- The flag's reason (a key of the product's list) and its note (sealed: it may quote the person).
    reason TEXT,
    note TEXT,
    flagged_by TEXT,
    created_at INTEGER NOT NULL,
    -- 'aberto', 'rotulado' or 'descartado'.
    state TEXT NOT NULL DEFAULT 'aberto',
    -- The failure categories a reviewer ticked (keys of [revisao] categorias).
    labels TEXT,
    -- What should have happened (sealed: it quotes the answer).
    expectation TEXT,
    -- The transcript written from it, relative to the review folder.
    test_file TEXT,
    reviewed_by TEXT,
    reviewed_at INTEGER,
    UNIQUE (conversation_id, message_id, source)
);
CREATE INDEX review_items_by_tenant ON review_items (tenant_id, state, created_at);
CREATE TABLE faq_decisions (
    tenant_id TEXT NOT NULL,
    -- The suggestion's key (its group's fingerprint).
    suggestion TEXT NOT NULL,
    -- 'aprovada' (with the entry written) or 'descartada'.
    decision TEXT NOT NULL,
    entry TEXT,
    decided_by TEXT NOT NULL,
    decided_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, suggestion)
);
