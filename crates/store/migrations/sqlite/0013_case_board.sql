-- Where support agents watch a case (issue "Step 14"): the id of the case's root post on the support
-- board (a Mattermost channel), set once the post exists; the thread under it is the case's.
ALTER TABLE cases ADD COLUMN board_post TEXT;
CREATE INDEX cases_by_board_post ON cases (board_post) WHERE board_post IS NOT NULL;
