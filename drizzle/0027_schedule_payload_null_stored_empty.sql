-- A schedule's job template stored with `payload: null` (accepted so before the template's
-- payload was stored as a submit stores it) holds `{}`, the payload its jobs get: the schedule
-- showed null where its jobs showed {}.
UPDATE `schedules` SET `job` = json_set(`job`, '$.payload', json('{}'))
  WHERE json_type(`job`, '$.payload') = 'null';
