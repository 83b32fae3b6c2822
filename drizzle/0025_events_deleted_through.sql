-- The largest event id ever deleted, which a resuming event stream compares with its Last-Event-ID
-- (src-main/engine/store/event-log.ts replayStart). Retention and purges deleted events before
-- anything recorded which: a database that holds events takes its newest as that mark, so that a
-- reader resuming from before this start is told it may have missed some (a gap), never left
-- believing it got them all. A reader that was up to date resumes with no gap.
INSERT INTO `settings` (`key`, `value`) SELECT 'events_deleted_through', CAST(MAX(`id`) AS TEXT) FROM `events` HAVING MAX(`id`) IS NOT NULL;
