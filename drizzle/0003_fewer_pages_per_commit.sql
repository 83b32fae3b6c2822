PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_events` (
	`id` integer PRIMARY KEY NOT NULL,
	`ts` integer NOT NULL,
	`entity_type` text NOT NULL,
	`entity_id` text NOT NULL,
	`job_id` text,
	`event_type` text NOT NULL,
	`data` text NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_events`("id", "ts", "entity_type", "entity_id", "job_id", "event_type", "data") SELECT "id", "ts", "entity_type", "entity_id", "job_id", "event_type", "data" FROM `events`;--> statement-breakpoint
DROP TABLE `events`;--> statement-breakpoint
ALTER TABLE `__new_events` RENAME TO `events`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `events_job` ON `events` (`job_id`,`id`);--> statement-breakpoint
CREATE INDEX `events_counted_type_ts` ON `events` (`event_type`,`ts`) WHERE event_type IN ('JOB_DONE', 'JOB_FAILED', 'JOB_TIMEOUT', 'JOB_CANCELED', 'LEASE_EXPIRED');--> statement-breakpoint
CREATE TABLE `__new_stream_messages` (
	`id` integer PRIMARY KEY NOT NULL,
	`enqueue_id` text NOT NULL,
	`stream` text NOT NULL,
	`job_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`acked_at` integer,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
INSERT INTO `__new_stream_messages`("id", "enqueue_id", "stream", "job_id", "created_at", "acked_at") SELECT "id", "enqueue_id", "stream", "job_id", "created_at", "acked_at" FROM `stream_messages`;--> statement-breakpoint
DROP TABLE `stream_messages`;--> statement-breakpoint
ALTER TABLE `__new_stream_messages` RENAME TO `stream_messages`;--> statement-breakpoint
CREATE INDEX `stream_messages_job` ON `stream_messages` (`job_id`,`id`);