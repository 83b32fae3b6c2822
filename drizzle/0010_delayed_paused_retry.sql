CREATE TABLE `paused_queues` (
	`queue` text PRIMARY KEY NOT NULL,
	`paused_at` integer NOT NULL,
	`paused_by` text
);
--> statement-breakpoint
ALTER TABLE `jobs` ADD `attempt_budget` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `jobs` ADD `run_at` integer;--> statement-breakpoint
UPDATE `jobs` SET `attempt_budget` = `max_attempts`;