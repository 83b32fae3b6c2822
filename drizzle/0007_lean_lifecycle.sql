-- A lease and its attempt become one row; stream messages become a column of their job.
ALTER TABLE `leases` ADD `attempt` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `leases` ADD `disposition` text;--> statement-breakpoint
ALTER TABLE `leases` ADD `error` text;--> statement-breakpoint
UPDATE `leases` SET `attempt` = `attempts`.`number`, `disposition` = `attempts`.`disposition`, `error` = `attempts`.`error`
  FROM `attempts` WHERE `attempts`.`lease_id` = `leases`.`id`;--> statement-breakpoint
DROP TABLE `attempts`;--> statement-breakpoint
-- Message ids keep increasing from the largest one handed out (see src-main/engine/counters.ts).
INSERT INTO `settings` (`key`, `value`)
  SELECT 'stream_message_ids_reserved', CAST(COALESCE(MAX(`id`), 0) AS TEXT) FROM `stream_messages`
  WHERE true ON CONFLICT (`key`) DO NOTHING;--> statement-breakpoint
DROP TABLE `stream_messages`;--> statement-breakpoint
CREATE UNIQUE INDEX `leases_job_attempt` ON `leases` (`job_id`,`attempt`);
