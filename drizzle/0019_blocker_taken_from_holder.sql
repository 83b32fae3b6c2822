-- A resolved blocker keeps what its force release did (the event log kept it alone before); filled in for those answered before, from their BLOCKER_RESOLVED events where retention left them.
ALTER TABLE `blockers` ADD `taken_from_holder` integer;--> statement-breakpoint
UPDATE `blockers` SET `taken_from_holder` = (SELECT json_extract(`data`, '$.taken_from_holder') FROM `events` WHERE `entity_type` = 'BLOCKER' AND `entity_id` = `blockers`.`id` AND `event_type` = 'BLOCKER_RESOLVED' ORDER BY `id` DESC LIMIT 1) WHERE `resolution` = 'force_release';
