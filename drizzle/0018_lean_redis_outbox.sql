-- The outbox holds only the messages Redis should hold: a row whose attempt ended goes in the transaction that ends it (the relay's reconciliation deletes such an entry from Redis).
DELETE FROM `redis_outbox` WHERE `ack_due` = 1;--> statement-breakpoint
DROP INDEX `redis_outbox_unpublished`;--> statement-breakpoint
DROP INDEX `redis_outbox_ack_due`;--> statement-breakpoint
ALTER TABLE `redis_outbox` DROP COLUMN `redis_id`;--> statement-breakpoint
ALTER TABLE `redis_outbox` DROP COLUMN `ack_due`;
