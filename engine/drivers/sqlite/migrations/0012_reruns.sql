-- 0012: reruns (engine/reruns.py). A rerun from a step moves the job to a new run; `rerun_of`
-- names the run it came from. Every run's steps carry the job id, so they go with the job.
ALTER TABLE mcp_jobs_jobs ADD COLUMN rerun_of TEXT;
