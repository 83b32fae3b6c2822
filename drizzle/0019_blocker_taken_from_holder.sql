-- A resolved blocker keeps what its force release took (the event log kept it alone before); filled in for those answered before, from their BLOCKER_RESOLVED events where retention left them. The events are read once, into a table keyed by blocker, not once per blocker (no index finds a blocker's events).
ALTER TABLE `blockers` ADD `taken_from_holder` integer;--> statement-breakpoint
UPDATE `blockers` SET `taken_from_holder` = `resolved`.`taken`
  FROM (SELECT `entity_id`, json_extract(`data`, '$.taken_from_holder') AS `taken`, MAX(`id`) FROM `events` WHERE `entity_type` = 'BLOCKER' AND `event_type` = 'BLOCKER_RESOLVED' GROUP BY `entity_id`) AS `resolved`
  WHERE `resolved`.`entity_id` = `blockers`.`id` AND `blockers`.`resolution` = 'force_release';
