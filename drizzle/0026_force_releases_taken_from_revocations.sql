-- A force release answered by a release before the answer recorded taken_from_holder left it
-- null on its blocker (0019 found nothing in its BLOCKER_RESOLVED event), the value of a retry
-- or a cancel. Where the FILE_LEASE_REVOKED event of the named holder's lease (reason
-- force_released; its file is the holder's, a folder holding the blocked file) is left, the
-- release took the file from it: 1. The revocations are read once,
-- in one pass over the events, not once per blocker. Where retention deleted that event, what
-- the release took is not known, and stays null.
UPDATE `blockers` SET `taken_from_holder` = 1
  FROM (
    SELECT DISTINCT json_extract(`data`, '$.file') AS `file`, json_extract(`data`, '$.owner_id') AS `owner_id`, json_extract(`data`, '$.acquired_at') AS `acquired_at`
    FROM `events` WHERE `event_type` = 'FILE_LEASE_REVOKED' AND json_extract(`data`, '$.reason') = 'force_released'
  ) AS `revoked`
  WHERE `blockers`.`resolution` = 'force_release' AND `blockers`.`taken_from_holder` IS NULL
    AND `revoked`.`file` = COALESCE(`blockers`.`holder_file`, `blockers`.`file`) AND `revoked`.`owner_id` = `blockers`.`holder_owner_id` AND `revoked`.`acquired_at` = `blockers`.`holder_acquired_at`;
