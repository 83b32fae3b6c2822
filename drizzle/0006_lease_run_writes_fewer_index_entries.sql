DROP INDEX `leases_token_unique`;--> statement-breakpoint
DROP INDEX `jobs_state_seq`;--> statement-breakpoint
CREATE INDEX `jobs_state_seq` ON `jobs` (`state`,`seq`) WHERE state NOT IN ('LEASED', 'RUNNING', 'DONE');