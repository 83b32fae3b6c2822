CREATE TABLE `schedule_runs` (
	`schedule_id` text NOT NULL,
	`fire_at` integer NOT NULL,
	`schedule_name` text NOT NULL,
	`outcome` text NOT NULL,
	`job_id` text,
	`reason` text,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`schedule_id`, `fire_at`)
);
--> statement-breakpoint
CREATE INDEX `schedule_runs_job` ON `schedule_runs` (`job_id`) WHERE job_id IS NOT NULL;--> statement-breakpoint
CREATE TABLE `schedules` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`cron` text NOT NULL,
	`timezone` text NOT NULL,
	`job` text NOT NULL,
	`overlap` text NOT NULL,
	`enabled` integer NOT NULL,
	`next_fire_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `schedules_name_unique` ON `schedules` (`name`);--> statement-breakpoint
CREATE INDEX `schedules_due` ON `schedules` (`next_fire_at`) WHERE enabled = 1;