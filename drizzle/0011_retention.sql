CREATE TABLE `stats_counts` (
	`event_type` text NOT NULL,
	`ts` integer NOT NULL,
	`n` integer NOT NULL,
	PRIMARY KEY(`ts`, `event_type`)
);
--> statement-breakpoint
CREATE INDEX `jobs_finished` ON `jobs` (`finished_at`) WHERE state IN ('DONE', 'FAILED', 'CANCELED', 'TIMEOUT');