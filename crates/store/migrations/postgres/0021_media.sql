-- Voice notes and photos (issue "Step 21"): a channel's media message is stored with the handle its
-- channel gives to fetch the media (sealed: it opens the person's recording), never with the bytes; a
-- voice note's transcript replaces the stored text once heard. The seconds of audio transcribed are
-- counted with the turn's usage.
ALTER TABLE messages ADD COLUMN media JSONB;
ALTER TABLE usage_metrics ADD COLUMN audio_ms BIGINT NOT NULL DEFAULT 0;
