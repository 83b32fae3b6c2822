CREATE TABLE `blockers` (
	`id` text PRIMARY KEY NOT NULL,
	`seq` integer NOT NULL,
	`file` text NOT NULL,
	`holder_owner_id` text NOT NULL,
	`holder_job_id` text,
	`holder_acquired_at` integer NOT NULL,
	`holder_last_heartbeat_at` integer NOT NULL,
	`retry_s` integer NOT NULL,
	`denied_at` integer NOT NULL,
	`retried_at` integer NOT NULL,
	`requester_owner_id` text NOT NULL,
	`requester_job_id` text,
	`requester_lease_id` text,
	`state` text NOT NULL,
	`resolution` text,
	`note` text,
	`resolved_by` text,
	`resolved_at` integer,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `blockers_seq_unique` ON `blockers` (`seq`);--> statement-breakpoint
CREATE INDEX `blockers_state_seq` ON `blockers` (`state`,`seq`);--> statement-breakpoint
CREATE INDEX `blockers_requester_job` ON `blockers` (`requester_job_id`);--> statement-breakpoint
CREATE TABLE `file_contentions` (
	`file` text NOT NULL,
	`owner_id` text NOT NULL,
	`lease_id` text,
	`job_id` text,
	`denied_at` integer NOT NULL,
	`retry_at` integer NOT NULL,
	PRIMARY KEY(`file`, `owner_id`)
);
--> statement-breakpoint
CREATE TABLE `file_leases` (
	`id` text PRIMARY KEY NOT NULL,
	`file` text NOT NULL,
	`owner_id` text NOT NULL,
	`lease_id` text,
	`job_id` text,
	`state` text NOT NULL,
	`acquired_at` integer NOT NULL,
	`last_heartbeat_at` integer NOT NULL,
	`released_at` integer,
	`release_reason` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `file_leases_active_file` ON `file_leases` (`file`) WHERE state = 'ACTIVE';--> statement-breakpoint
CREATE INDEX `file_leases_active_idle` ON `file_leases` (`last_heartbeat_at`) WHERE state = 'ACTIVE';--> statement-breakpoint
CREATE INDEX `file_leases_lease` ON `file_leases` (`lease_id`);--> statement-breakpoint
CREATE INDEX `file_leases_owner_file` ON `file_leases` (`owner_id`,`file`);