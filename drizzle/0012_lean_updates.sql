-- jobs_claim_expiry and jobs_finished are keyed on their own column instead of on `state`, so a
-- grant and a completion no longer maintain them. The rows keep the rule the indexes rely on: a
-- job has claim_expires_at only while a claim holds it, and finished_at only while it is finished.
UPDATE `jobs` SET `claim_expires_at` = NULL WHERE `claim_expires_at` IS NOT NULL AND `state` NOT IN ('CLAIMED', 'PREPARING', 'LEASE_PENDING');--> statement-breakpoint
UPDATE `jobs` SET `finished_at` = NULL WHERE `finished_at` IS NOT NULL AND `state` NOT IN ('DONE', 'FAILED', 'CANCELED', 'TIMEOUT');--> statement-breakpoint
DROP INDEX `jobs_claim_expiry`;--> statement-breakpoint
DROP INDEX `jobs_finished`;--> statement-breakpoint
CREATE INDEX `jobs_claim_expiry` ON `jobs` (`claim_expires_at`) WHERE claim_expires_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX `jobs_finished` ON `jobs` (`finished_at`) WHERE finished_at IS NOT NULL;
