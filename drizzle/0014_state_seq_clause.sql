DROP INDEX `jobs_state_seq`;--> statement-breakpoint
CREATE INDEX `jobs_state_seq` ON `jobs` (`state`,`seq`) WHERE state <> 'QUEUED' AND state <> 'LEASED' AND state <> 'RUNNING' AND state <> 'DONE';