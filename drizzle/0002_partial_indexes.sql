DROP INDEX `jobs_idempotency_key_unique`;--> statement-breakpoint
DROP INDEX `jobs_addon_seq`;--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_idempotency_key` ON `jobs` (`idempotency_key`) WHERE idempotency_key IS NOT NULL;--> statement-breakpoint
CREATE INDEX `jobs_addon_seq` ON `jobs` (`addon_id`,`seq`) WHERE addon_id IS NOT NULL;--> statement-breakpoint
DROP INDEX `leases_active_expiry`;--> statement-breakpoint
CREATE INDEX `leases_active_expiry` ON `leases` (`expires_at`,`cost_units`) WHERE state = 'ACTIVE';