-- Turn leases without WAL (issue "Step 23"): a lease only says which process runs a conversation's turn
-- now. Taking and releasing one were two of a turn's four commits that waited for the WAL to reach the
-- disk; a transaction that touches only an unlogged table writes no WAL, so its commit waits for none.
-- After a crash of the server the table comes back empty, as it would once every lease had expired:
-- the turns that held them lost their connections with the crash, and a turn's lease never guarded
-- money on its own (a confirmation is consumed once, by its own row).
ALTER TABLE conversation_leases SET UNLOGGED;
