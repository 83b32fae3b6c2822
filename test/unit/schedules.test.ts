import { mkdirSync, realpathSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { EventRow } from '../../src-main/db/schema'
import type { Engine } from '../../src-main/engine'
import { HOUR, MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { canonicalTimeZone, dueFiring, hostTimeZone, JOBLESS_RUNS_SQL, parseCron, type ScheduleInput } from '../../src-main/engine/verbs/schedules'
import { EXPIRED_RUNS_SQL } from '../../src-main/engine/verbs/prune'
import { idKeySql, keyedId } from '../../src-main/engine/store/ids'
import { ScheduleTimer, type Timers } from '../../src-main/schedules/timer'
import { setup, T0 } from '../helpers/engine'
import { expectEngineError, FakeTimers, openFileEngine, tempDir } from './support'
import { database, sql } from '../helpers/database'

const DAY = 24 * HOUR

/** A schedule in UTC with test defaults plus overrides. */
const aSchedule = (overrides: Partial<ScheduleInput> = {}): ScheduleInput => ({
  name: 'nightly',
  cron: '0 2 * * *',
  timezone: 'UTC',
  job: { job_type: 'backup', cost_units: 1 },
  ...overrides,
})

const scheduleEvents = (engine: Engine): EventRow[] =>
  sql(engine).all<EventRow>("SELECT * FROM events WHERE entity_type = 'SCHEDULE' ORDER BY id")

const jobsOf = (engine: Engine) => sql(engine).all<{ id: string; job_type: string; state: string }>('SELECT id, job_type, state FROM jobs ORDER BY seq')

const runsOf = (engine: Engine) =>
  sql(engine).all<{ fire_at: number; outcome: string; job_id: string | null; reason: string | null }>(
    'SELECT fire_at, outcome, job_id, reason FROM schedule_runs ORDER BY fire_at',
  )

const at = (text: string) => Date.parse(text)

describe('the firing decision (pure, takes now)', () => {
  const hourly = parseCron('0 * * * *', 'UTC')

  it('nothing is due before the next firing, nor without one', () => {
    expect(dueFiring(hourly, T0 + HOUR, T0 + HOUR - 1)).toBeNull()
    expect(dueFiring(hourly, null, T0 + DAY)).toBeNull()
  })

  it('at its time exactly one firing is due, and the schedule goes on from the next', () => {
    expect(dueFiring(hourly, T0 + HOUR, T0 + HOUR)).toEqual({ fire_at: T0 + HOUR, next_fire_at: T0 + 2 * HOUR, caught_up: false })
    expect(dueFiring(hourly, T0 + HOUR, T0 + HOUR + 59 * MINUTE)).toEqual({ fire_at: T0 + HOUR, next_fire_at: T0 + 2 * HOUR, caught_up: false })
  })

  it('after downtime only the latest missed firing is due (one catch-up run)', () => {
    expect(dueFiring(hourly, T0 + HOUR, T0 + 5 * HOUR + 10 * MINUTE)).toEqual({ fire_at: T0 + 5 * HOUR, next_fire_at: T0 + 6 * HOUR, caught_up: true })
  })
})

describe('creating, changing and deleting schedules', () => {
  it('a created schedule lists its next three firings; it fires first at its first firing after now', () => {
    const { engine } = setup()
    const schedule = engine.createSchedule(aSchedule({ overlap: 'skip' }))
    expect(schedule).toMatchObject({
      name: 'nightly',
      cron: '0 2 * * *',
      timezone: 'UTC',
      job: { job_type: 'backup', cost_units: 1 },
      overlap: 'skip',
      enabled: true,
      next_fire_at: T0 + 2 * HOUR,
      next_fire_times: [T0 + 2 * HOUR, T0 + DAY + 2 * HOUR, T0 + 2 * DAY + 2 * HOUR],
      last_run: null,
      created_at: T0,
    })
    expect(engine.getSchedule('nightly')).toEqual(schedule)
    expect(engine.listSchedules()).toEqual([schedule])
    expect(scheduleEvents(engine).map((e) => e.event_type)).toEqual(['SCHEDULE_CREATED'])
  })

  it("the host's own time zone is read from the zone file TZ names when the runtime gives it no name; an empty TZ is UTC; a rule, an unknown name or a name the runtime does not know as spelled is refused as such, not guessed", () => {
    expect(hostTimeZone('Europe/Berlin', ':/nowhere')).toBe('Europe/Berlin') // the runtime's name wins
    expect(hostTimeZone(undefined, ':/usr/share/zoneinfo/Europe/Berlin')).toBe('Europe/Berlin')
    expect(hostTimeZone(undefined, '/usr/share/zoneinfo/Asia/Kolkata')).toBe('Asia/Kolkata')
    expect(hostTimeZone('Etc/Unknown', '')).toBe('UTC')
    // A POSIX rule, which the runtime takes for UTC whatever it says: refused, but for UTC's own.
    expect(hostTimeZone('UTC', 'Europe/Berlin')).toBe('Europe/Berlin')
    expect(hostTimeZone(undefined, 'UTC0')).toBe('UTC')
    expect(expectEngineError(() => hostTimeZone('UTC', 'CET-1CEST'), 400, 'invalid_timezone').message).toMatch(/is a rule, not a zone's name \(TZ="CET-1CEST"\): give the schedule a timezone/)
    expect(expectEngineError(() => hostTimeZone('UTC', '<+03>-3'), 400, 'invalid_timezone').message).toMatch(/is a rule, not a zone's name/)
    // A name no zone has is said as such, not taken for a rule.
    expect(expectEngineError(() => hostTimeZone(undefined, 'Mars/Base'), 400, 'invalid_timezone').message).toMatch(/has no name this host knows \(TZ="Mars\/Base"\)/)
    // A name in another case than the zone's: the runtime and glibc know no such zone and run on
    // UTC, so the schedules would not follow the machine's clock; UTC's own names in any case do.
    expect(expectEngineError(() => hostTimeZone(undefined, 'europe/berlin'), 400, 'invalid_timezone').message).toMatch(
      /not spelled as its name \(TZ="europe\/berlin", the zone Europe\/Berlin\), so this host's clock runs on UTC: .* start the host with TZ=Europe\/Berlin/,
    )
    expect(expectEngineError(() => hostTimeZone(undefined, 'est'), 400, 'invalid_timezone').message).toMatch(/TZ=EST$/)
    expect(hostTimeZone(undefined, 'utc')).toBe('UTC')
    expect(hostTimeZone('Europe/Berlin', 'europe/berlin')).toBe('Europe/Berlin') // a runtime that knows it so
    expect(hostTimeZone(undefined, ':/etc/localtime')).toBe(canonicalTimeZone(realpathSync('/etc/localtime').split('/zoneinfo/')[1]!))
    expect(expectEngineError(() => hostTimeZone(undefined, ':/nowhere/at/all'), 400, 'invalid_timezone').message).toMatch(/TZ=":\/nowhere\/at\/all"\): give the schedule a timezone/)
  })

  it('overlap defaults to allow and the time zone to the host\'s own, stored in its canonical spelling', () => {
    const { engine } = setup()
    const schedule = engine.createSchedule(aSchedule({ timezone: undefined }))
    expect(schedule.overlap).toBe('allow')
    expect(schedule.timezone).toBe(Intl.DateTimeFormat().resolvedOptions().timeZone)
    expect(engine.createSchedule(aSchedule({ name: 'berlin', timezone: 'europe/berlin' })).timezone).toBe('Europe/Berlin')
  })

  it('a link name given in any case is stored in its own spelling, read from the system\'s zone files (us/pacific → US/Pacific, est → EST)', () => {
    const { dir, cleanup } = tempDir()
    const tzdir = process.env.TZDIR
    try {
      // A zone folder of the system's layout: links are files of their own name, as zones are.
      for (const name of ['US/Pacific', 'Europe/Kyiv', 'Asia/Kolkata', 'EST', 'posix/US/Pacific']) {
        mkdirSync(dirname(join(dir, name)), { recursive: true })
        writeFileSync(join(dir, name), 'TZif')
      }
      process.env.TZDIR = dir
      const { engine } = setup()
      const stored = (zone: string) => engine.createSchedule(aSchedule({ name: `z-${zone.replace(/\//g, '.')}`, timezone: zone })).timezone
      expect(['us/pacific', 'europe/kyiv', 'ASIA/KOLKATA', 'est', 'Europe/Berlin'].map(stored)).toEqual(['US/Pacific', 'Europe/Kyiv', 'Asia/Kolkata', 'EST', 'Europe/Berlin'])
      // Where the system has no zone files (Windows), a link's name is kept as typed; ICU's own names are still corrected.
      process.env.TZDIR = join(dir, 'none')
      expect(['us/pacific', 'europe/berlin'].map((zone) => canonicalTimeZone(zone))).toEqual(['us/pacific', 'Europe/Berlin'])
    } finally {
      if (tzdir === undefined) delete process.env.TZDIR
      else process.env.TZDIR = tzdir
      cleanup()
    }
  })

  it('a zone named by its current IANA name keeps it, not the older one ICU resolves it to (Asia/Kolkata, not Asia/Calcutta), and fires on its clock', () => {
    const { engine } = setup()
    for (const zone of ['Asia/Kolkata', 'Europe/Kyiv', 'America/Argentina/Buenos_Aires']) {
      expect(engine.createSchedule(aSchedule({ name: zone.replace(/\//g, '.'), timezone: zone })).timezone).toBe(zone)
    }
    // 02:00 in Kolkata (UTC+5:30) is 20:30 UTC the day before.
    const kolkata = engine.createSchedule(aSchedule({ name: 'kolkata-2am', cron: '0 2 * * *', timezone: 'Asia/Kolkata' }))
    expect(new Date(kolkata.next_fire_at!).toISOString()).toMatch(/T20:30:00\.000Z$/)
  })

  it('a duplicate name is 409 duplicate_schedule, and nothing is written', () => {
    const { engine } = setup()
    engine.createSchedule(aSchedule())
    expectEngineError(() => engine.createSchedule(aSchedule({ cron: '* * * * *' })), 409, 'duplicate_schedule')
    expect(engine.listSchedules()).toHaveLength(1)
    expect(scheduleEvents(engine)).toHaveLength(1)
  })

  it('a bad cron expression is 400 invalid_cron with the reason, in the expression\'s terms (a value as written, a lone L in day of week sent to day of month)', () => {
    const { engine } = setup()
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ cron: '61 * * * *' })), 400, 'invalid_cron').detail).toBe(
      'cron: minute 61 is out of range (0–59)',
    )
    // croner counts days and months from 0; the reason names the value as written.
    for (const [cron, reason] of [
      ['* * * 13 *', 'month 13 is out of range (1–12)'],
      ['0 0 0 * *', 'day of month 0 is out of range (1–31)'],
      ['* * 32 * *', 'day of month 32 is out of range (1–31)'],
      ['* 24 * * *', 'hour 24 is out of range (0–23)'],
      // A lone L belongs to day of month; croner says only that it is "not a number".
      ['0 0 * * L', 'day of week L: a lone L (the last day of the month) belongs to day of month (0 0 L * *); in day of week it follows a weekday (5L, the last Friday)'],
      ['0 0 * * 1,L', 'day of week L: a lone L (the last day of the month) belongs to day of month (0 0 L * *); in day of week it follows a weekday (5L, the last Friday)'],
    ]) {
      expect(expectEngineError(() => engine.createSchedule(aSchedule({ cron })), 400, 'invalid_cron').detail).toBe(`cron: ${reason}`)
    }
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ cron: 'every day' })), 400, 'invalid_cron').detail).toMatch(/^cron: .*five, six, or seven/)
    // Valid, but it never fires again: it could never do anything.
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ cron: '0 0 0 30 2 *' })), 400, 'invalid_cron').detail).toMatch(/never fires/)
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ cron: '0 0 0 1 1 * 2020' })), 400, 'invalid_cron').detail).toMatch(/never fires/)
  })

  it('an unknown time zone is 400 invalid_timezone naming it', () => {
    const { engine } = setup()
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ timezone: 'Mars/Olympus_Mons' })), 400, 'invalid_timezone').detail).toMatch(
      /^timezone: "Mars\/Olympus_Mons" is not a time zone/,
    )
  })

  it('the job template is held to the rules of a submit: a cost above the total capacity, a bad max_attempts', () => {
    const { engine } = setup({ total_units: 10 })
    const tooBig = expectEngineError(() => engine.createSchedule(aSchedule({ job: { job_type: 'x', cost_units: 11 } })), 400, 'cost_exceeds_capacity')
    expect(tooBig.detail).toMatch(/^job\.cost_units: 11 exceeds the total capacity of 10/)
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ job: { job_type: 'x', cost_units: 1, max_attempts: 0 } })), 400, 'invalid_request').detail).toBe(
      'job.max_attempts: must be an integer of at least 1',
    )
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ job: { job_type: '', cost_units: 1 } })), 400, 'invalid_request').detail).toBe(
      'job.job_type: must be a non-empty string',
    )
    expect(engine.listSchedules()).toEqual([])
  })

  it('a template\'s payload null is stored as {}, as a submit stores it, on create and on change', () => {
    const { engine } = setup()
    expect(engine.createSchedule(aSchedule({ job: { job_type: 'x', cost_units: 1, payload: null } })).job.payload).toEqual({})
    expect(engine.getSchedule('nightly').job.payload).toEqual({})
    engine.updateSchedule('nightly', { job: { job_type: 'x', cost_units: 1, payload: { a: 1 } } })
    expect(engine.updateSchedule('nightly', { job: { job_type: 'x', cost_units: 1, payload: null } }).job.payload).toEqual({})
  })

  it('a name that could not go into a URL unquoted is 400', () => {
    const { engine } = setup()
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ name: 'a b/c' })), 400, 'invalid_request').detail).toMatch(/^name: /)
  })

  it('a schedule name takes ASCII letters only, and its refusal says so: a letter such as é is refused as no letter the name takes', () => {
    const { engine } = setup()
    expect(expectEngineError(() => engine.createSchedule(aSchedule({ name: 'café' })), 400, 'invalid_request').detail).toBe(
      'name: 1 to 200 ASCII letters, digits, ".", "_", ":" or "-", starting with a letter or digit',
    )
  })

  it('changing the expression or the time zone moves the next firing; other changes keep it', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule())
    clock.advance(30 * MINUTE)
    expect(engine.updateSchedule('nightly', { cron: '0 4 * * *' })).toMatchObject({ next_fire_at: T0 + 4 * HOUR, updated_at: T0 + 30 * MINUTE })
    expect(engine.updateSchedule('nightly', { timezone: 'America/New_York' }).next_fire_at).toBe(at('2026-01-01T09:00:00Z')) // 04:00 EST
    const before = engine.getSchedule('nightly').next_fire_at
    expect(engine.updateSchedule('nightly', { overlap: 'skip', job: { job_type: 'other', cost_units: 2 } })).toMatchObject({
      next_fire_at: before,
      overlap: 'skip',
      job: { job_type: 'other', cost_units: 2 },
    })
    const updates = scheduleEvents(engine).filter((e) => e.event_type === 'SCHEDULE_UPDATED')
    expect(updates.map((e) => JSON.parse(e.data).changed)).toEqual([['cron'], ['timezone'], ['job', 'overlap']])
  })

  it('a change to the values in force writes nothing and logs no event; an update names only the fields that changed', () => {
    const { engine, clock } = setup()
    const created = engine.createSchedule(aSchedule())
    clock.advance(30 * MINUTE)
    const same = { cron: ' 0 2 * * * ', timezone: 'UTC', job: { job_type: 'backup', cost_units: 1 }, overlap: created.overlap, enabled: true }
    expect(engine.updateSchedule('nightly', same)).toEqual(created)
    // The same job template with its fields in another order is the same template.
    expect(engine.updateSchedule('nightly', { job: { cost_units: 1, job_type: 'backup' } })).toEqual(created)
    expect(engine.updateSchedule('nightly', { ...same, enabled: false })).toMatchObject({ enabled: false, updated_at: T0 + 30 * MINUTE })
    const updates = scheduleEvents(engine).filter((e) => e.event_type === 'SCHEDULE_UPDATED')
    expect(updates.map((e) => JSON.parse(e.data).changed)).toEqual([['enabled']])
  })

  it('a change of an unknown schedule is 404; an empty change or a bad one is 400 and changes nothing', () => {
    const { engine } = setup()
    expectEngineError(() => engine.updateSchedule('nope', { enabled: false }), 404, 'schedule_not_found')
    engine.createSchedule(aSchedule())
    expectEngineError(() => engine.updateSchedule('nightly', {}), 400, 'invalid_request')
    expectEngineError(() => engine.updateSchedule('nightly', { cron: '0 25 * * *', enabled: false }), 400, 'invalid_cron')
    expect(engine.getSchedule('nightly')).toMatchObject({ cron: '0 2 * * *', enabled: true })
  })

  it('a schedule says whether it fires: enabled, paused, finished once its cron has no firing left, stopped when its cron can no longer be read', () => {
    const { engine, clock } = setup()
    // Fires once: 02:00 on 1 January 2026 (seconds first, year last).
    engine.createSchedule(aSchedule({ name: 'once', cron: '0 0 2 1 1 * 2026' }))
    expect(engine.getSchedule('once')).toMatchObject({ enabled: true, state: 'enabled', next_fire_at: T0 + 2 * HOUR })
    clock.set(T0 + 2 * HOUR)
    expect(engine.fireDueSchedules()).toHaveLength(1)
    expect(engine.getSchedule('once')).toMatchObject({ enabled: true, state: 'finished', next_fire_at: null, next_fire_times: [] })
    // Resuming it changes nothing: it stays finished, and says so.
    expect(engine.updateSchedule('once', { enabled: true })).toMatchObject({ state: 'finished', next_fire_at: null })
    engine.createSchedule(aSchedule({ name: 'paused', enabled: false }))
    expect(engine.getSchedule('paused')).toMatchObject({ enabled: false, state: 'paused', next_fire_at: null })
    // A zone this host's ICU data no longer has: the firing is skipped and the schedule stops until edited.
    engine.createSchedule(aSchedule({ name: 'gone-zone', cron: '*/10 * * * *' }))
    sql(engine).run("UPDATE schedules SET timezone = 'Mars/Olympus_Mons' WHERE name = 'gone-zone'")
    clock.advance(10 * MINUTE)
    engine.fireDueSchedules()
    expect(engine.getSchedule('gone-zone')).toMatchObject({ enabled: true, state: 'stopped', next_fire_at: null })
    expect(engine.updateSchedule('gone-zone', { timezone: 'UTC' }).state).toBe('enabled')
  })

  it('a stopped schedule paused and resumed is stopped again, as it was, not refused for the zone it cannot read', () => {
    const { engine } = setup()
    engine.createSchedule(aSchedule({ name: 'gone', cron: '*/10 * * * *' }))
    sql(engine).run("UPDATE schedules SET timezone = 'Mars/Base', next_fire_at = NULL WHERE name = 'gone'")
    expect(engine.getSchedule('gone').state).toBe('stopped')
    expect(engine.updateSchedule('gone', { enabled: false }).state).toBe('paused')
    expect(engine.updateSchedule('gone', { enabled: true })).toMatchObject({ enabled: true, state: 'stopped', next_fire_at: null })
    // A new timing given with it must still be one this host reads.
    engine.updateSchedule('gone', { enabled: false })
    expectEngineError(() => engine.updateSchedule('gone', { enabled: true, cron: '0 25 * * *' }), 400, 'invalid_cron')
    expect(engine.updateSchedule('gone', { enabled: true, timezone: 'UTC' }).state).toBe('enabled')
  })

  it('a deleted schedule is gone and never fires; its name can be used again', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule())
    expect(engine.deleteSchedule('nightly').name).toBe('nightly')
    expectEngineError(() => engine.getSchedule('nightly'), 404, 'schedule_not_found')
    expectEngineError(() => engine.deleteSchedule('nightly'), 404, 'schedule_not_found')
    clock.advance(DAY)
    expect(engine.fireDueSchedules()).toEqual([])
    expect(engine.createSchedule(aSchedule()).name).toBe('nightly')
    expect(scheduleEvents(engine).map((e) => e.event_type)).toEqual(['SCHEDULE_CREATED', 'SCHEDULE_DELETED', 'SCHEDULE_CREATED'])
  })
})

describe('editing from a read: the revision (docs/schedules.md)', () => {
  const stored = (engine: Engine) => sql(engine).one<Record<string, unknown>>("SELECT * FROM schedules WHERE name = 'nightly'")

  it('a schedule edit made from an old read is refused (412 precondition_failed), and nothing is written', () => {
    const { engine } = setup()
    const read = engine.createSchedule(aSchedule())
    expect(read.revision).toBe(1)
    // Another edit lands between the read and this one.
    expect(engine.updateSchedule('nightly', { job: { job_type: 'backup', cost_units: 2 } }, [read.revision]).revision).toBe(2)
    const before = stored(engine)
    const events = scheduleEvents(engine).length
    const refused = expectEngineError(() => engine.updateSchedule('nightly', { cron: '0 3 * * *', job: { job_type: 'restore', cost_units: 1 } }, [read.revision]), 412, 'precondition_failed')
    expect(refused.detail).toBe(
      'Schedule nightly changed since it was read (the request was made from revision 1; it is at revision 2): read it again and make the change over what it holds now',
    )
    expect(stored(engine)).toEqual(before)
    expect(scheduleEvents(engine)).toHaveLength(events)
    // Made from the revision in force, it goes ahead; with no revision named, as before.
    expect(engine.updateSchedule('nightly', { cron: '0 3 * * *' }, [1, 2])).toMatchObject({ cron: '0 3 * * *', revision: 3, job: { cost_units: 2 } })
    expect(engine.updateSchedule('nightly', { overlap: 'skip' }).revision).toBe(4)
    // An If-Match of only tags the host never gave names no revision: refused too.
    expectEngineError(() => engine.updateSchedule('nightly', { overlap: 'allow' }, []), 412, 'precondition_failed')
  })

  it('a schedule delete made from an old read is refused, and the schedule stays', () => {
    const { engine } = setup()
    engine.createSchedule(aSchedule())
    engine.updateSchedule('nightly', { timezone: 'Europe/Berlin' })
    expectEngineError(() => engine.deleteSchedule('nightly', [1]), 412, 'precondition_failed')
    expect(engine.getSchedule('nightly').timezone).toBe('Europe/Berlin')
    expect(engine.deleteSchedule('nightly', [2]).revision).toBe(2)
  })

  it('pausing, resuming and firing leave the revision: an edit made before them is not refused for them', () => {
    const { engine, clock } = setup()
    const read = engine.createSchedule(aSchedule({ cron: '0 * * * *' }))
    engine.updateSchedule('nightly', { enabled: false })
    engine.updateSchedule('nightly', { enabled: true })
    clock.advance(2 * HOUR)
    expect(engine.fireDueSchedules()).toHaveLength(1)
    expect(engine.getSchedule('nightly').revision).toBe(read.revision)
    engine.updateSchedule('nightly', { enabled: false })
    // The edit sends no `enabled`: the pause made since stays.
    expect(engine.updateSchedule('nightly', { overlap: 'skip' }, [read.revision])).toMatchObject({ overlap: 'skip', enabled: false, revision: 2 })
    // A change to the values in force writes nothing, the revision included.
    expect(engine.updateSchedule('nightly', { overlap: 'skip' }, [2]).revision).toBe(2)
  })
})

describe('firing', () => {
  it('a firing submits its job through the submit verb; the job records its schedule and fire time', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ job: { job_type: 'backup', cost_units: 3, priority: 'HIGH', payload: { to: '/mnt' }, queue: 'nightly', tags: ['b'] } }))
    clock.set(T0 + 2 * HOUR)
    const [firing] = engine.fireDueSchedules()
    expect(firing).toMatchObject({ name: 'nightly', fire_at: T0 + 2 * HOUR, outcome: 'FIRED', reason: null })
    const job = engine.getJob(firing!.job_id!)
    expect(job).toMatchObject({ job_type: 'backup', cost_units: 3, priority: 'HIGH', queue: 'nightly', state: 'QUEUED', created_at: T0 + 2 * HOUR })
    expect(job.payload).toEqual({ to: '/mnt' })
    expect(engine.scheduleOrigins([job.id, 'other'])).toEqual(new Map([[job.id, { name: 'nightly', fire_at: T0 + 2 * HOUR }]]))
    // The job's timeline says the schedule made it.
    expect(engine.jobEvents(job.id).map((e) => e.event_type)).toEqual(['JOB_SUBMITTED', 'SCHEDULE_FIRED'])
    expect(engine.getSchedule('nightly')).toMatchObject({
      next_fire_at: T0 + DAY + 2 * HOUR,
      last_run: { fire_at: T0 + 2 * HOUR, outcome: 'FIRED', job_id: job.id, job_state: 'QUEUED' },
    })
  })

  it('fires exactly once per fire time, however many firing attempts come at that time', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '*/10 * * * *' }))
    clock.set(T0 + 10 * MINUTE)
    expect(engine.fireDueSchedules()).toHaveLength(1)
    expect(engine.fireDueSchedules()).toEqual([])
    clock.advance(5 * MINUTE)
    expect(engine.fireDueSchedules()).toEqual([])
    clock.set(T0 + 20 * MINUTE)
    expect(engine.fireDueSchedules()).toHaveLength(1)
    expect(runsOf(engine).map((r) => r.fire_at)).toEqual([T0 + 10 * MINUTE, T0 + 20 * MINUTE])
    expect(jobsOf(engine)).toHaveLength(2)
  })

  it('the key (schedule, fire time) refuses a second run even if a schedule were moved back to a handled firing', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '*/10 * * * *' }))
    clock.set(T0 + 10 * MINUTE)
    engine.fireDueSchedules()
    sql(engine).run('UPDATE schedules SET next_fire_at = ?', T0 + 10 * MINUTE) // as a stale timer would believe
    expect(engine.fireDueSchedules()).toEqual([])
    expect(jobsOf(engine)).toHaveLength(1)
  })

  it('fires exactly once across a restart, and catches up once after downtime (the latest missed firing)', () => {
    const { dir, cleanup } = tempDir()
    try {
      const path = join(dir, 'leasehold.db')
      const first = openFileEngine(path)
      first.engine.createSchedule(aSchedule({ cron: '0 * * * *' }))
      first.clock.set(T0 + HOUR + 30 * SECOND)
      expect(first.engine.fireDueSchedules()).toHaveLength(1)
      first.sqlite.close()

      // Back at the same moment: that firing is handled.
      const second = openFileEngine(path, { clock: first.clock })
      expect(second.engine.fireDueSchedules()).toEqual([])
      second.sqlite.close()

      // Down from 01:00:30 to 05:20: firings at 02:00, 03:00, 04:00 and 05:00 were missed; one run, 05:00's.
      first.clock.set(T0 + 5 * HOUR + 20 * MINUTE)
      const third = openFileEngine(path, { clock: first.clock })
      const firings = third.engine.fireDueSchedules()
      expect(firings).toEqual([expect.objectContaining({ fire_at: T0 + 5 * HOUR, outcome: 'FIRED' })])
      expect(third.engine.fireDueSchedules()).toEqual([])
      expect(runsOf(third.engine).map((r) => r.fire_at)).toEqual([T0 + HOUR, T0 + 5 * HOUR])
      expect(jobsOf(third.engine)).toHaveLength(2)
      const fired = scheduleEvents(third.engine).filter((e) => e.event_type === 'SCHEDULE_FIRED').map((e) => JSON.parse(e.data))
      expect(fired[1]).toMatchObject({ fire_at: T0 + 5 * HOUR, caught_up: true, missed_from: T0 + 2 * HOUR, next_fire_at: T0 + 6 * HOUR })
      expect(third.engine.getSchedule('nightly').next_fire_at).toBe(T0 + 6 * HOUR)
      third.sqlite.close()
    } finally {
      cleanup()
    }
  })

  it('overlap skip: a firing while the last run is unfinished is skipped and recorded; once it ends, the next fires', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '* * * * *', overlap: 'skip' }))
    clock.set(T0 + MINUTE)
    const [first] = engine.fireDueSchedules()
    clock.set(T0 + 2 * MINUTE)
    expect(engine.fireDueSchedules()).toEqual([
      { name: 'nightly', fire_at: T0 + 2 * MINUTE, outcome: 'SKIPPED', job_id: null, reason: `overlap: the last run's job ${first!.job_id} has not finished` },
    ])
    const skipped = scheduleEvents(engine).filter((e) => e.event_type === 'SCHEDULE_SKIPPED')
    expect(JSON.parse(skipped[0]!.data)).toEqual({ name: 'nightly', fire_at: T0 + 2 * MINUTE, reason: 'overlap', running_job_id: first!.job_id })
    expect(engine.getSchedule('nightly').last_run).toMatchObject({ outcome: 'SKIPPED', job_id: null })

    engine.cancel(first!.job_id!)
    clock.set(T0 + 3 * MINUTE)
    expect(engine.fireDueSchedules()).toEqual([expect.objectContaining({ outcome: 'FIRED' })])
    expect(jobsOf(engine)).toHaveLength(2)
  })

  it("a schedule's last firing is the run made last, not the latest fire time: after the clock is set back, overlap skip and last_run follow the runs made since", () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ name: 'ovx', cron: '*/20 * * * * *', overlap: 'skip' }))
    // The clock runs an hour ahead: a catch-up run fires, and the next firing is skipped while its job runs.
    clock.set(T0 + HOUR + 2 * MINUTE)
    const [ahead] = engine.fireDueSchedules()
    clock.set(T0 + HOUR + 2 * MINUTE + 20 * SECOND)
    expect(engine.fireDueSchedules()).toEqual([expect.objectContaining({ outcome: 'SKIPPED' })])
    engine.cancel(ahead!.job_id!)

    // Set back: the schedule is re-aimed, and its firings are earlier than the runs made ahead.
    clock.set(T0 + 2 * MINUTE + 10 * SECOND)
    expect(engine.reaimSchedules()).toBe(1)
    clock.set(T0 + 2 * MINUTE + 20 * SECOND)
    const [fired] = engine.fireDueSchedules()
    expect(fired).toMatchObject({ outcome: 'FIRED' })
    expect(engine.getSchedule('ovx').last_run).toMatchObject({ fire_at: T0 + 2 * MINUTE + 20 * SECOND, outcome: 'FIRED', job_id: fired!.job_id })
    // Its job outlasts the interval: the next firing is skipped, as it would be on a clock never set.
    clock.set(T0 + 2 * MINUTE + 40 * SECOND)
    expect(engine.fireDueSchedules()).toEqual([
      { name: 'ovx', fire_at: T0 + 2 * MINUTE + 40 * SECOND, outcome: 'SKIPPED', job_id: null, reason: `overlap: the last run's job ${fired!.job_id} has not finished` },
    ])
    expect(engine.getSchedule('ovx').last_run).toMatchObject({ fire_at: T0 + 2 * MINUTE + 40 * SECOND, outcome: 'SKIPPED' })
    expect(jobsOf(engine)).toHaveLength(2)
  })

  it('overlap allow (the default) fires whatever still runs', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '* * * * *' }))
    for (let minute = 1; minute <= 3; minute++) {
      clock.set(T0 + minute * MINUTE)
      engine.fireDueSchedules()
    }
    expect(jobsOf(engine).map((j) => j.state)).toEqual(['QUEUED', 'QUEUED', 'QUEUED'])
  })

  it('a submit refused at firing time (capacity lowered below the cost) is recorded as SKIPPED and the schedule goes on', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '* * * * *', job: { job_type: 'big', cost_units: 50 } }))
    engine.setCapacity({ total_units: 10 })
    clock.set(T0 + MINUTE)
    const [firing] = engine.fireDueSchedules()
    expect(firing).toMatchObject({ outcome: 'SKIPPED', job_id: null, reason: expect.stringMatching(/^cost_exceeds_capacity: cost_units: 50 exceeds/) })
    expect(jobsOf(engine)).toEqual([])
    expect(engine.getSchedule('nightly').next_fire_at).toBe(T0 + 2 * MINUTE)
  })

  it('a disabled schedule never fires; enabled again, it goes on from now without catching up', () => {
    const { engine, clock } = setup()
    expect(engine.createSchedule(aSchedule({ name: 'off', cron: '* * * * *', enabled: false }))).toMatchObject({ next_fire_at: null, next_fire_times: [] })
    engine.createSchedule(aSchedule({ name: 'paused', cron: '* * * * *' }))
    expect(engine.updateSchedule('paused', { enabled: false })).toMatchObject({ enabled: false, next_fire_at: null })
    expect(engine.nextScheduleFireAt()).toBeNull()
    clock.advance(DAY)
    expect(engine.fireDueSchedules()).toEqual([])
    expect(jobsOf(engine)).toEqual([])
    expect(engine.updateSchedule('paused', { enabled: true }).next_fire_at).toBe(T0 + DAY + MINUTE)
    expect(engine.fireDueSchedules()).toEqual([])
  })

  it('an expression in a time zone fires at its local time', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '0 9 * * 1-5', timezone: 'Asia/Tokyo' })) // 09:00 JST = 00:00 UTC
    expect(engine.getSchedule('nightly').next_fire_times).toEqual([at('2026-01-02T00:00:00Z'), at('2026-01-05T00:00:00Z'), at('2026-01-06T00:00:00Z')])
    clock.set(at('2026-01-02T00:00:00Z'))
    expect(engine.fireDueSchedules()).toHaveLength(1)
  })

  it('seconds: a six-field expression fires on its seconds', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '*/15 * * * * *' }))
    expect(engine.getSchedule('nightly').next_fire_times).toEqual([T0 + 15 * SECOND, T0 + 30 * SECOND, T0 + 45 * SECOND])
    clock.set(T0 + 15 * SECOND)
    expect(engine.fireDueSchedules()).toHaveLength(1)
  })
})

describe('the runs a schedule keeps: the database stops growing (docs/retention.md)', () => {
  /** A schedule that fires each minute `fired` times (its jobs canceled), then skips `skipped` times (its cost above the capacity). */
  function runFor(engine: Engine, clock: { set(ms: number): void }, fired: number, skipped: number) {
    engine.createSchedule(aSchedule({ cron: '* * * * *', job: { job_type: 'report', cost_units: 5 } }))
    for (let minute = 1; minute <= fired + skipped; minute++) {
      if (minute === fired + 1) engine.setCapacity({ total_units: 1 })
      clock.set(T0 + minute * MINUTE)
      for (const firing of engine.fireDueSchedules()) if (firing.job_id) engine.cancel(firing.job_id)
    }
    return jobsOf(engine).map((job) => job.id)
  }

  it('a run goes with its job; the newest run and the newest that fired stay, whatever their jobs', () => {
    const { engine, clock } = setup()
    const jobs = runFor(engine, clock, 3, 2)
    expect(engine.deleteFinishedJobs(jobs).sort()).toEqual([...jobs].sort())
    expect(runsOf(engine).map((r) => [r.fire_at, r.outcome])).toEqual([
      [T0 + 3 * MINUTE, 'FIRED'],
      [T0 + 4 * MINUTE, 'SKIPPED'],
      [T0 + 5 * MINUTE, 'SKIPPED'],
    ])
    expect(engine.getSchedule('nightly').last_run).toMatchObject({ fire_at: T0 + 5 * MINUTE, outcome: 'SKIPPED' })
  })

  it('runs that hold no job go once older than the retention cutoff; the newest run and the newest that fired stay', () => {
    const { engine, clock } = setup()
    const jobs = runFor(engine, clock, 2, 4)
    engine.deleteFinishedJobs(jobs.slice(0, 1)) // the first run goes with its job
    // Before minute 5: the skipped runs of minutes 3 and 4 go; the second run keeps its job.
    expect(engine.pruneScheduleRuns(T0 + 5 * MINUTE, 100)).toBe(2)
    expect(runsOf(engine).map((r) => r.fire_at)).toEqual([2, 5, 6].map((minute) => T0 + minute * MINUTE))
    // A step deletes at most its limit; everything old enough, in the end.
    expect(engine.pruneScheduleRuns(T0 + DAY, 1)).toBe(1)
    expect(engine.pruneScheduleRuns(T0 + DAY, 100)).toBe(0)
    expect(runsOf(engine).map((r) => r.fire_at)).toEqual([2, 6].map((minute) => T0 + minute * MINUTE))
    expect(engine.scheduleOrigins([jobs[1]!]).get(jobs[1]!)).toEqual({ name: 'nightly', fire_at: T0 + 2 * MINUTE })
  })

  it('the runs retention keeps are the newest made and the newest made that fired, not those of the latest fire times (a clock set back)', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '* * * * *', overlap: 'skip' }))
    clock.set(T0 + HOUR + MINUTE)
    const [ahead] = engine.fireDueSchedules()
    clock.set(T0 + HOUR + 2 * MINUTE)
    engine.fireDueSchedules() // skipped: the job of an hour ahead runs
    engine.cancel(ahead!.job_id!)
    clock.set(T0 + 30 * SECOND)
    engine.reaimSchedules()
    clock.set(T0 + MINUTE)
    const [fired] = engine.fireDueSchedules()
    clock.set(T0 + 2 * MINUTE)
    engine.fireDueSchedules() // skipped: the job just made runs
    engine.cancel(fired!.job_id!)
    expect(engine.deleteFinishedJobs([ahead!.job_id!, fired!.job_id!])).toHaveLength(2)
    expect(engine.pruneScheduleRuns(T0 + DAY, 100)).toBe(1)
    expect(runsOf(engine).map((r) => [r.fire_at, r.outcome])).toEqual([
      [T0 + MINUTE, 'FIRED'],
      [T0 + 2 * MINUTE, 'SKIPPED'],
    ])
    expect(engine.getSchedule('nightly').last_run).toMatchObject({ fire_at: T0 + 2 * MINUTE, outcome: 'SKIPPED' })
  })

  it('deleting a schedule deletes its runs that hold no job; the runs of its kept jobs go with those jobs', () => {
    const { engine, clock } = setup()
    const jobs = runFor(engine, clock, 2, 2)
    engine.deleteFinishedJobs(jobs.slice(0, 1))
    engine.deleteSchedule('nightly')
    expect(runsOf(engine)).toEqual([expect.objectContaining({ fire_at: T0 + 2 * MINUTE, job_id: jobs[1] })])
    expect(engine.scheduleOrigins([jobs[1]!]).get(jobs[1]!)).toEqual({ name: 'nightly', fire_at: T0 + 2 * MINUTE })
    engine.deleteFinishedJobs(jobs.slice(1))
    expect(runsOf(engine)).toEqual([])
  })
})

describe("a schedule's runs find their jobs by their key", () => {
  const plan = (engine: Engine, statement: string, ...params: unknown[]) =>
    (database(engine).prepare(`EXPLAIN QUERY PLAN ${statement}`).all(...params) as { detail: string }[]).map((row) => row.detail)

  it("deleting a schedule, and pruning its runs, find the runs' jobs by their key: the plans scan no table", () => {
    const { engine } = setup()
    for (const [statement, params] of [
      [JOBLESS_RUNS_SQL, ['id']],
      [EXPIRED_RUNS_SQL, [{ id: 'id', cutoff: T0, limit: 10 }]],
    ] as const) {
      const steps = plan(engine, statement, ...params)
      expect(steps.filter((step) => step.startsWith('SCAN')), statement).toEqual([])
      expect(steps, statement).toContainEqual(expect.stringMatching(/^SEARCH jobs USING INTEGER PRIMARY KEY \(rowid=\?\)$/))
      expect(steps, statement).toContainEqual(expect.stringMatching(/^SEARCH jobs USING (COVERING )?INDEX jobs_unkeyed_id \(id=\?\)$/))
    }
  })

  it('the key SQL reads from a keyed id is the key the id names', () => {
    const { engine } = setup()
    for (const key of [0, 1, 255, 4096, 123456789, 2 ** 48 - 1]) {
      const id = keyedId(key)
      expect(sql(engine).one<{ key: number }>(`SELECT ${idKeySql('?')} AS key`, ...Array(12).fill(id))?.key).toBe(key)
    }
  })

  it('a run whose job has an id from before ids named their key keeps the job, and goes with it', () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '* * * * *' }))
    clock.set(T0 + MINUTE)
    const [fired] = engine.fireDueSchedules()
    engine.cancel(fired!.job_id!)
    const unkeyed = '01890a5d-ac96-774b-bcce-b302099a8057' // a UUID version 7, as job ids were
    sql(engine).run('UPDATE jobs SET id = ? WHERE id = ?', unkeyed, fired!.job_id)
    sql(engine).run('UPDATE schedule_runs SET job_id = ? WHERE job_id = ?', unkeyed, fired!.job_id)
    engine.deleteSchedule('nightly')
    expect(runsOf(engine).map((run) => run.job_id)).toEqual([unkeyed])
    expect(engine.deleteFinishedJobs([unkeyed])).toEqual([unkeyed])
    expect(runsOf(engine)).toEqual([])
  })
})

describe('daylight saving time: a daily 02:30 in Europe/Berlin (docs/schedules.md)', () => {
  /** Steps the clock to each firing the schedule announces and fires it; returns the fire times. */
  function fireThrough(engine: Engine, clock: { set(ms: number): void }, until: number): number[] {
    const fired: number[] = []
    for (;;) {
      const next = engine.getSchedule('berlin').next_fire_at!
      if (next > until) return fired
      clock.set(next)
      fired.push(...engine.fireDueSchedules().map((f) => f.fire_at))
    }
  }

  it('spring forward (29 March 2026, 02:00 → 03:00): the missing 02:30 fires once, at 03:00 CEST', () => {
    const { engine, clock } = setup()
    clock.set(at('2026-03-27T12:00:00Z'))
    engine.createSchedule(aSchedule({ name: 'berlin', cron: '30 2 * * *', timezone: 'Europe/Berlin' }))
    expect(fireThrough(engine, clock, at('2026-03-30T12:00:00Z'))).toEqual([
      at('2026-03-28T01:30:00Z'), // 02:30 CET
      at('2026-03-29T01:00:00Z'), // 03:00 CEST: the first valid time after the gap, that day
      at('2026-03-30T00:30:00Z'), // 02:30 CEST
    ])
    expect(jobsOf(engine)).toHaveLength(3)
  })

  it('fall back (25 October 2026, 03:00 → 02:00): the twice-lived 02:30 fires once, at its first occurrence', () => {
    const { engine, clock } = setup()
    clock.set(at('2026-10-23T12:00:00Z'))
    engine.createSchedule(aSchedule({ name: 'berlin', cron: '30 2 * * *', timezone: 'Europe/Berlin' }))
    expect(fireThrough(engine, clock, at('2026-10-26T12:00:00Z'))).toEqual([
      at('2026-10-24T00:30:00Z'), // 02:30 CEST
      at('2026-10-25T00:30:00Z'), // 02:30 CEST, the first of the two; not again at 02:30 CET (01:30Z)
      at('2026-10-26T01:30:00Z'), // 02:30 CET
    ])
    // Firing attempts through the repeated hour find nothing more to fire.
    clock.set(at('2026-10-25T01:30:00Z'))
    expect(engine.fireDueSchedules()).toEqual([])
  })

  it('an interval expression runs through the repeated hour on both passes (every 30 minutes, fall back)', () => {
    const { engine, clock } = setup()
    clock.set(at('2026-10-24T23:50:00Z')) // 01:50 CEST
    engine.createSchedule(aSchedule({ name: 'berlin', cron: '*/30 * * * *', timezone: 'Europe/Berlin' }))
    expect(fireThrough(engine, clock, at('2026-10-25T02:00:00Z'))).toEqual(
      ['00:00', '00:30', '01:00', '01:30', '02:00'].map((time) => at(`2026-10-25T${time}:00Z`)), // 02:00, 02:30 CEST, 02:00, 02:30 CET, 03:00 CET
    )
  })
})

describe('the schedule timer', () => {
  const timers: ScheduleTimer[] = []
  afterEach(async () => {
    for (const timer of timers.splice(0)) await timer.stop()
  })
  const timerFor = (engine: Engine, clock: { now(): number }, fake: Timers, maxSleepMs = 12 * HOUR) => {
    const timer = new ScheduleTimer(engine, { clock, timers: fake, maxSleepMs, onError: (error) => { throw error } })
    timers.push(timer)
    return timer
  }

  it('sets one timer, for the earliest next firing, and sets it again on create, update and delete', async () => {
    const { engine, clock } = setup()
    const fake = new FakeTimers()
    const timer = timerFor(engine, clock, fake)
    await timer.start()
    expect(fake.armed).toEqual([])
    expect(timer.armedFor).toBeNull()

    await engine.run(() => engine.createSchedule(aSchedule({ name: 'late', cron: '0 6 * * *' })))
    expect(fake.armed.map((t) => t.ms)).toEqual([6 * HOUR])
    await engine.run(() => engine.createSchedule(aSchedule({ name: 'early', cron: '0 1 * * *' })))
    expect(fake.armed.map((t) => t.ms)).toEqual([HOUR])
    await engine.run(() => engine.updateSchedule('early', { cron: '0 3 * * *' }))
    expect(fake.armed.map((t) => t.ms)).toEqual([3 * HOUR])
    await engine.run(() => engine.deleteSchedule('early'))
    expect(fake.armed.map((t) => t.ms)).toEqual([6 * HOUR])
    await engine.run(() => engine.updateSchedule('late', { enabled: false }))
    expect(fake.armed).toEqual([])
  })

  it('fires when its timer runs out, then sets itself for the firing after', async () => {
    const { engine, clock } = setup()
    const fake = new FakeTimers()
    engine.createSchedule(aSchedule({ cron: '0 * * * *' }))
    const timer = timerFor(engine, clock, fake)
    await timer.start()
    expect(timer.armedFor).toBe(T0 + HOUR)
    clock.set(T0 + HOUR)
    fake.runOut()
    await timer.check()
    expect(jobsOf(engine)).toHaveLength(1)
    expect(timer.armedFor).toBe(T0 + 2 * HOUR)
    expect(fake.armed.map((t) => t.ms)).toEqual([HOUR])
  })

  it('a timer that wakes early (its sleep is capped) sleeps again without firing', async () => {
    const { engine, clock } = setup()
    const fake = new FakeTimers()
    engine.createSchedule(aSchedule({ cron: '0 * * * *' }))
    const timer = timerFor(engine, clock, fake, 10 * MINUTE)
    await timer.start()
    expect(fake.armed.map((t) => t.ms)).toEqual([10 * MINUTE])
    clock.advance(10 * MINUTE)
    fake.runOut()
    expect(fake.armed.map((t) => t.ms)).toEqual([10 * MINUTE])
    clock.set(T0 + HOUR - 5 * MINUTE) // the machine slept: less than the cap is left
    fake.runOut()
    expect(fake.armed.map((t) => t.ms)).toEqual([5 * MINUTE])
    expect(jobsOf(engine)).toEqual([])
  })

  it('at start it catches up the firing missed while the host was down, once', async () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '0 * * * *' }))
    clock.set(T0 + 3 * HOUR + 1)
    await timerFor(engine, clock, new FakeTimers()).start()
    expect(runsOf(engine)).toEqual([expect.objectContaining({ fire_at: T0 + 3 * HOUR, outcome: 'FIRED' })])
    await timerFor(engine, clock, new FakeTimers()).start()
    expect(jobsOf(engine)).toHaveLength(1)
  })

  it('two timers firing at the same moment make one job per fire time', async () => {
    const { engine, clock } = setup()
    engine.createSchedule(aSchedule({ cron: '*/5 * * * *' }))
    const [a, b] = [new FakeTimers(), new FakeTimers()]
    const [one, two] = [timerFor(engine, clock, a), timerFor(engine, clock, b)]
    await Promise.all([one.start(), two.start()])
    for (let step = 1; step <= 3; step++) {
      clock.set(T0 + step * 5 * MINUTE)
      a.runOut()
      b.runOut()
      await Promise.all([one.check(), two.check()])
    }
    expect(runsOf(engine).map((r) => r.fire_at)).toEqual([5, 10, 15].map((m) => T0 + m * MINUTE))
    expect(jobsOf(engine)).toHaveLength(3)
  })

  it('a stopped timer fires nothing more', async () => {
    const { engine, clock } = setup()
    const fake = new FakeTimers()
    engine.createSchedule(aSchedule({ cron: '0 * * * *' }))
    const timer = timerFor(engine, clock, fake)
    await timer.start()
    await timer.stop()
    expect(fake.armed).toEqual([])
    clock.set(T0 + HOUR)
    await timer.check()
    expect(jobsOf(engine)).toEqual([])
  })
})
