CREATE TABLE `redis_outbox` (
	`enqueue_id` integer PRIMARY KEY NOT NULL,
	`job_id` text NOT NULL,
	`queue` text NOT NULL,
	`created_at` integer NOT NULL,
	`redis_id` text,
	`ack_due` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE INDEX `redis_outbox_unpublished` ON `redis_outbox` (`enqueue_id`) WHERE redis_id IS NULL;--> statement-breakpoint
CREATE INDEX `redis_outbox_ack_due` ON `redis_outbox` (`enqueue_id`) WHERE ack_due = 1;