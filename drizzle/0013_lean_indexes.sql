-- Fewer index entries per job (docs/performance.md, "Where a commit's time goes").
-- 1. The counted events go into stats_counts, per type and minute, up to a mark in settings, while
--    the index that finds them is still there: the statistics then read that table, not the log.
INSERT INTO `stats_counts` (`event_type`, `ts`, `n`)
  SELECT `event_type`, `ts` - `ts` % 60000, COUNT(*) FROM `events`
  WHERE event_type IN ('JOB_DONE', 'JOB_FAILED', 'JOB_TIMEOUT', 'JOB_CANCELED', 'LEASE_EXPIRED') GROUP BY 1, 2
  ON CONFLICT (`ts`, `event_type`) DO UPDATE SET `n` = `n` + excluded.`n`;--> statement-breakpoint
INSERT INTO `settings` (`key`, `value`) SELECT 'events_counted_through', CAST(COALESCE(MAX(`id`), 0) AS TEXT) FROM `events`
  WHERE true ON CONFLICT (`key`) DO UPDATE SET `value` = excluded.`value`;--> statement-breakpoint
-- 2. Leases lose their foreign key (it needed an index on every job's id) and their indexes; each
--    names its job's previous lease, found here through the old leases_job_attempt index.
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
	`attempt` integer NOT NULL,
	`disposition` text,
	`error` text,
	`prev_fence` integer
);
--> statement-breakpoint
INSERT INTO `__new_leases`("fence", "id", "job_id", "attempt_id", "worker_id", "addon_id", "cost_units", "ttl_s", "grace_s", "state", "token", "granted_at", "last_heartbeat_at", "expires_at", "released_at", "release_status", "attempt", "disposition", "error", "prev_fence")
  SELECT l."fence", l."id", l."job_id", l."attempt_id", l."worker_id", l."addon_id", l."cost_units", l."ttl_s", l."grace_s", l."state", l."token", l."granted_at", l."last_heartbeat_at", l."expires_at", l."released_at", l."release_status", l."attempt", l."disposition", l."error",
    (SELECT p."fence" FROM `leases` p WHERE p."job_id" = l."job_id" AND p."attempt" = l."attempt" - 1)
  FROM `leases` l;--> statement-breakpoint
DROP TABLE `leases`;--> statement-breakpoint
ALTER TABLE `__new_leases` RENAME TO `leases`;--> statement-breakpoint
CREATE UNIQUE INDEX `leases_unkeyed_id` ON `leases` (`id`) WHERE substr(id, 15, 1) <> '8';--> statement-breakpoint
-- 3. A job's events become a chain (jobs.last_event_id, events.prev_id); the events before it keep
--    a partial index, as do those that name no job. The counted events' index goes (see 1).
DROP INDEX `events_job`;--> statement-breakpoint
DROP INDEX `events_counted_type_ts`;--> statement-breakpoint
ALTER TABLE `events` ADD `prev_id` integer;--> statement-breakpoint
CREATE INDEX `events_unchained_job` ON `events` (`job_id`,`id`) WHERE prev_id IS NULL AND job_id IS NOT NULL;--> statement-breakpoint
CREATE INDEX `events_jobless_ts` ON `events` (`ts`) WHERE job_id IS NULL;--> statement-breakpoint
-- 4. Jobs: only the ids made before ids named their key are indexed; QUEUED jobs are counted and
--    listed through the pick index, so jobs_state_seq leaves them out.
DROP INDEX `jobs_id_unique`;--> statement-breakpoint
DROP INDEX `jobs_state_seq`;--> statement-breakpoint
ALTER TABLE `jobs` ADD `last_event_id` integer;--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_unkeyed_id` ON `jobs` (`id`) WHERE substr(id, 15, 1) <> '8';--> statement-breakpoint
CREATE INDEX `jobs_state_seq` ON `jobs` (`state`,`seq`) WHERE state NOT IN ('QUEUED', 'LEASED', 'RUNNING', 'DONE');
