CREATE TABLE `attempts` (
	`id` text PRIMARY KEY NOT NULL,
	`job_id` text NOT NULL,
	`lease_id` text NOT NULL,
	`worker_id` text NOT NULL,
	`number` integer NOT NULL,
	`started_at` integer NOT NULL,
	`finished_at` integer,
	`outcome` text,
	`disposition` text,
	`error` text,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `attempts_job_number` ON `attempts` (`job_id`,`number`);--> statement-breakpoint
CREATE TABLE `events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`ts` integer NOT NULL,
	`entity_type` text NOT NULL,
	`entity_id` text NOT NULL,
	`job_id` text,
	`event_type` text NOT NULL,
	`data` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `events_job` ON `events` (`job_id`,`id`);--> statement-breakpoint
CREATE INDEX `events_type_ts` ON `events` (`event_type`,`ts`);--> statement-breakpoint
CREATE TABLE `jobs` (
	`seq` integer PRIMARY KEY NOT NULL,
	`id` text NOT NULL,
	`addon_id` text,
	`job_type` text NOT NULL,
	`priority` integer NOT NULL,
	`cost_units` integer NOT NULL,
	`constraints` text NOT NULL,
	`payload` text NOT NULL,
	`is_unique` integer NOT NULL,
	`idempotency_key` text,
	`tags` text NOT NULL,
	`max_runtime_s` integer,
	`queue` text NOT NULL,
	`max_attempts` integer NOT NULL,
	`state` text NOT NULL,
	`attempts` integer NOT NULL,
	`claimed_by` text,
	`claim_expires_at` integer,
	`lease_id` text,
	`next_retry_at` integer,
	`eligible_at` integer NOT NULL,
	`cancel_requested` integer NOT NULL,
	`progress` real,
	`note` text,
	`dead_letter` integer NOT NULL,
	`final_status` text,
	`error` text,
	`result` text,
	`metrics` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_id_unique` ON `jobs` (`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_idempotency_key_unique` ON `jobs` (`idempotency_key`);--> statement-breakpoint
CREATE INDEX `jobs_pick` ON `jobs` (`priority`,`eligible_at`,`seq`) WHERE state = 'QUEUED';--> statement-breakpoint
CREATE INDEX `jobs_pick_queue` ON `jobs` (`queue`,`priority`,`eligible_at`,`seq`) WHERE state = 'QUEUED';--> statement-breakpoint
CREATE INDEX `jobs_claim_expiry` ON `jobs` (`claim_expires_at`) WHERE state IN ('CLAIMED', 'PREPARING', 'LEASE_PENDING');--> statement-breakpoint
CREATE INDEX `jobs_state_seq` ON `jobs` (`state`,`seq`);--> statement-breakpoint
CREATE INDEX `jobs_addon_seq` ON `jobs` (`addon_id`,`seq`);--> statement-breakpoint
CREATE TABLE `leases` (
	`id` text PRIMARY KEY NOT NULL,
	`job_id` text NOT NULL,
	`attempt_id` text NOT NULL,
	`worker_id` text NOT NULL,
	`addon_id` text,
	`cost_units` integer NOT NULL,
	`ttl_s` integer NOT NULL,
	`grace_s` integer NOT NULL,
	`state` text NOT NULL,
	`token` text NOT NULL,
	`fence` integer NOT NULL,
	`granted_at` integer NOT NULL,
	`last_heartbeat_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`released_at` integer,
	`release_status` text,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `leases_token_unique` ON `leases` (`token`);--> statement-breakpoint
CREATE UNIQUE INDEX `leases_fence_unique` ON `leases` (`fence`);--> statement-breakpoint
CREATE INDEX `leases_active_expiry` ON `leases` (`expires_at`) WHERE state = 'ACTIVE';--> statement-breakpoint
CREATE INDEX `leases_active_worker` ON `leases` (`worker_id`) WHERE state = 'ACTIVE';--> statement-breakpoint
CREATE INDEX `leases_job` ON `leases` (`job_id`);--> statement-breakpoint
CREATE TABLE `settings` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `stats_samples` (
	`ts` integer PRIMARY KEY NOT NULL,
	`leases_active` integer NOT NULL,
	`jobs_queued` integer NOT NULL,
	`jobs_running` integer NOT NULL,
	`capacity_used` integer NOT NULL,
	`busy_rating` real NOT NULL
);
--> statement-breakpoint
CREATE TABLE `stream_messages` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`enqueue_id` text NOT NULL,
	`stream` text NOT NULL,
	`job_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`acked_at` integer,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `stream_messages_job` ON `stream_messages` (`job_id`,`id`);