PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_schedule_runs` (
	`seq` integer PRIMARY KEY NOT NULL,
	`schedule_id` text NOT NULL,
	`fire_at` integer NOT NULL,
	`schedule_name` text NOT NULL,
	`outcome` text NOT NULL,
	`job_id` text,
	`reason` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_schedule_runs`("seq", "schedule_id", "fire_at", "schedule_name", "outcome", "job_id", "reason", "created_at") SELECT "rowid", "schedule_id", "fire_at", "schedule_name", "outcome", "job_id", "reason", "created_at" FROM `schedule_runs`;--> statement-breakpoint
DROP TABLE `schedule_runs`;--> statement-breakpoint
ALTER TABLE `__new_schedule_runs` RENAME TO `schedule_runs`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `schedule_runs_firing` ON `schedule_runs` (`schedule_id`,`fire_at`);--> statement-breakpoint
CREATE INDEX `schedule_runs_schedule_seq` ON `schedule_runs` (`schedule_id`,`seq`);--> statement-breakpoint
CREATE INDEX `schedule_runs_job` ON `schedule_runs` (`job_id`) WHERE job_id IS NOT NULL;