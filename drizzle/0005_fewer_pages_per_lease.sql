PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_leases` (
	`fence` integer PRIMARY KEY NOT NULL,
	`id` text NOT NULL,
	`job_id` text NOT NULL,
	`attempt_id` text NOT NULL,
	`worker_id` text NOT NULL,
	`addon_id` text,
	`cost_units` integer NOT NULL,
	`ttl_s` integer NOT NULL,
	`grace_s` integer NOT NULL,
	`state` text NOT NULL,
	`token` text NOT NULL,
	`granted_at` integer NOT NULL,
	`last_heartbeat_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`released_at` integer,
	`release_status` text,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
INSERT INTO `__new_leases`("fence", "id", "job_id", "attempt_id", "worker_id", "addon_id", "cost_units", "ttl_s", "grace_s", "state", "token", "granted_at", "last_heartbeat_at", "expires_at", "released_at", "release_status") SELECT "fence", "id", "job_id", "attempt_id", "worker_id", "addon_id", "cost_units", "ttl_s", "grace_s", "state", "token", "granted_at", "last_heartbeat_at", "expires_at", "released_at", "release_status" FROM `leases`;--> statement-breakpoint
DROP TABLE `leases`;--> statement-breakpoint
ALTER TABLE `__new_leases` RENAME TO `leases`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `leases_id_unique` ON `leases` (`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `leases_token_unique` ON `leases` (`token`);--> statement-breakpoint
CREATE INDEX `leases_active` ON `leases` (`worker_id`,`cost_units`) WHERE state = 'ACTIVE';--> statement-breakpoint
DROP INDEX `jobs_state_seq`;--> statement-breakpoint
ALTER TABLE `jobs` ADD `stream_message_id` integer;--> statement-breakpoint
CREATE INDEX `jobs_state_seq` ON `jobs` (`state`,`seq`) WHERE state <> 'DONE';--> statement-breakpoint
UPDATE `jobs` SET `stream_message_id` = (SELECT MAX(`id`) FROM `stream_messages` WHERE `stream_messages`.`job_id` = `jobs`.`id`);--> statement-breakpoint
UPDATE `stream_messages` SET `acked_at` = `created_at` WHERE `acked_at` IS NULL AND `id` <> (SELECT `stream_message_id` FROM `jobs` WHERE `jobs`.`id` = `stream_messages`.`job_id`);--> statement-breakpoint
-- Dropped only now: the backfill above finds each job's newest message by it (without it, it read every message once per job).
DROP INDEX `stream_messages_job`;