CREATE TABLE `file_handovers` (
	`file` text PRIMARY KEY NOT NULL,
	`owner_id` text NOT NULL,
	`job_id` text,
	`blocker_id` text NOT NULL,
	`file_lease_id` text NOT NULL,
	`handed_at` integer NOT NULL,
	`until` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `file_handovers_job` ON `file_handovers` (`job_id`);