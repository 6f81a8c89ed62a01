-- A flow's output is its stages (flow_stages): the copy kept beside them is gone.
ALTER TABLE flow_runs DROP COLUMN output;
