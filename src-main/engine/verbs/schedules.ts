import { readdirSync, realpathSync } from 'node:fs'
import { isAbsolute, sep } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { Cron } from 'croner'
import type { JobRow, ScheduleRow, ScheduleRunRow } from '../../db/schema'
import type { CapacityStore } from '../memory/capacity-store'
import type { EngineContext } from '../memory/context'
import { EngineError, invalid, notFound } from '../rules/errors'
import { OVERLAP_POLICIES, type Overlap, SCHEDULE_STATES, type ScheduleState } from '../rules/schedules'
import { parseStored } from '../store/stored-value'
import { newId } from '../store/ids'
import { checkSubmit, costExceedsCapacity, submit, type SubmitJob } from './jobs'
import { findJob, jobExistsSql, recordJobEvent } from '../store/rows'
import { isTzRule } from '../../../src-shared/tz-rule'
import { type JobState, TERMINAL_STATES } from '../rules/states'

/**
 * Recurring schedules (docs/schedules.md): a cron expression in a time zone, and the job each
 * firing submits through the ordinary submit verb. The firing decision is pure and takes `now`
 * ({@link dueFiring}); {@link fireDueSchedules} applies it. Each firing is keyed by (schedule,
 * fire time) in `schedule_runs`, written in the transaction that submits its job and moves the
 * schedule's `next_fire_at` past it, so no firing ever makes two jobs.
 */

// The HTTP schedules route validates with the policies where it finds the other schedule rules.
export { OVERLAP_POLICIES, type Overlap, SCHEDULE_STATES, type ScheduleState }

/** How a handled firing ended. */
export const RUN_OUTCOMES = [
  /** A job was submitted. */
  'FIRED',
  /** No job: the last run was unfinished (overlap skip), or the submit was refused (the reason says why). */
  'SKIPPED',
] as const
export type RunOutcome = (typeof RUN_OUTCOMES)[number]

/** The job a schedule submits: the submit fields, without an idempotency key (each firing is a job of its own). */
export type JobTemplate = Omit<SubmitJob, 'idempotency_key'>

export interface ScheduleInput {
  name: string
  cron: string
  /** An IANA zone such as Europe/Berlin; default: the host's own zone, stored with the schedule. */
  timezone?: string | null
  job: JobTemplate
  overlap?: Overlap
  enabled?: boolean
}

/** A PATCH: each field given replaces the schedule's (`job` as a whole). */
export type ScheduleChange = Partial<Omit<ScheduleInput, 'name'>>

const CHANGEABLE = ['cron', 'timezone', 'job', 'overlap', 'enabled'] as const satisfies readonly (keyof ScheduleChange)[]

/** The last handled firing of a schedule. */
export interface ScheduleRun {
  fire_at: number
  outcome: RunOutcome
  /** Why a firing was skipped; null when it fired. */
  reason: string | null
  job_id: string | null
  /** The job's state now; null without a job, or when the job has been pruned. */
  job_state: JobState | null
}

/** A schedule as the engine hands it out. Times are epoch milliseconds. */
export interface Schedule {
  id: string
  name: string
  cron: string
  timezone: string
  job: JobTemplate
  overlap: Overlap
  enabled: boolean
  /** Whether it fires, and if not why (rules/schedules.ts SCHEDULE_STATES). */
  state: ScheduleState
  /** The earliest firing not yet handled; null while disabled or when the expression never fires again. */
  next_fire_at: number | null
  /** The next {@link UPCOMING} firings, `next_fire_at` first. */
  next_fire_times: number[]
  last_run: ScheduleRun | null
  /** Counts the changes to its settings (cron, timezone, job, overlap); 1 when created. See {@link checkRevision}. */
  revision: number
  created_at: number
  updated_at: number
}

/**
 * The revisions a write was made from (an If-Match's): the write goes ahead only when the
 * schedule's own is among them, else 412 `precondition_failed` and nothing is written. Empty:
 * none could match (an If-Match naming only tags this host never gave). Absent: no condition.
 */
export type ExpectedRevisions = readonly number[]

/** The settings whose change makes a new revision: what an edit replaces. Enabling and firing do not. */
const REVISED = ['cron', 'timezone', 'job', 'overlap'] as const satisfies readonly (typeof CHANGEABLE)[number][]

/** What one firing did. */
export interface Firing {
  name: string
  fire_at: number
  outcome: RunOutcome
  job_id: string | null
  reason: string | null
}

/** Which schedule firing made a job, for the job's views. */
export interface ScheduleOrigin {
  /** The schedule's name when it fired. */
  name: string
  fire_at: number
}

/** How many upcoming firings a schedule's view lists. */
export const UPCOMING = 3

/** ASCII letters, digits and `. _ : -`, starting with a letter or digit: a name that goes into a URL and a shell unquoted. */
export const SCHEDULE_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/

export const scheduleNotFound = (name: string) => notFound('schedule_not_found', 'schedule', name)

// ---------------------------------------------------------------------------------------------
// Cron expressions and time zones (pure)

/**
 * The host's own time zone, the default of a schedule created without one: the runtime's name
 * for it, else the zone file the `TZ` variable names (glibc's `:/usr/share/zoneinfo/Europe/Berlin`
 * or `:/etc/localtime`, which ICU gives no name) or /etc/localtime links to. An empty `TZ` is UTC,
 * as glibc reads it. A zone that has no name is refused (400 `invalid_timezone`), never guessed:
 * the schedule would fire at other hours than the machine's clock says.
 */
export function localTimeZone(): string {
  return hostTimeZone(Intl.DateTimeFormat().resolvedOptions().timeZone, process.env.TZ)
}

/** {@link localTimeZone} of a runtime that names its zone `named` (or not), with `TZ` set to `tz` (or not). */
export function hostTimeZone(named: string | undefined, tz: string | undefined): string {
  if (tz !== undefined && tz !== '' && !tz.startsWith(':') && !tz.startsWith('/')) return zoneOfTz(tz, !named || named === 'Etc/Unknown')
  if (named && named !== 'Etc/Unknown') return named
  if (tz === '') return 'UTC'
  const zone = zoneOfFile(tz === undefined ? '/etc/localtime' : tz.replace(/^:/, ''))
  if (zone) return zone
  throw new EngineError(
    'invalid_timezone',
    `the host's time zone has no name this host knows (TZ=${tz === undefined ? 'unset' : JSON.stringify(tz)}): give the schedule a timezone, or start the host with TZ set to an IANA name such as Europe/Berlin`,
  )
}

/**
 * The zone a `TZ` that is not a file names: an IANA name (`Europe/Berlin`), or a POSIX rule
 * (`CET-1CEST`, `UTC0`), which glibc reads and ICU does not: the runtime then says UTC whatever
 * the rule, and a schedule would fire at other hours than the machine's clock. A rule is refused
 * (400 `invalid_timezone`), but for UTC's own (`UTC0`, `GMT0`).
 */
function zoneOfTz(tz: string, unknownToRuntime: boolean): string {
  let zone: string
  try {
    zone = canonicalTimeZone(tz)
  } catch {
    if (/^(UTC|GMT|UCT)0$/.test(tz)) return 'UTC'
    const what = isTzRule(tz) ? "is a rule, not a zone's name" : 'has no name this host knows'
    throw new EngineError(
      'invalid_timezone',
      `the host's time zone ${what} (TZ=${JSON.stringify(tz)}): give the schedule a timezone, or start the host with TZ set to an IANA name such as Europe/Berlin`,
    )
  }
  // A name the runtime does not know as spelled (`europe/berlin`) leaves it on UTC, and glibc too,
  // which finds no zone file by that name: only UTC's own names then mean what they say.
  if (unknownToRuntime && !UTC_NAMES.has(new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone)) {
    throw new EngineError(
      'invalid_timezone',
      `the host's time zone is not spelled as its name (TZ=${JSON.stringify(tz)}, the zone ${zone}), so this host's clock runs on UTC: give the schedule a timezone, or start the host with TZ=${zone}`,
    )
  }
  return zone
}

/** The names ICU resolves UTC's own zones to. */
const UTC_NAMES = new Set(['UTC', 'Etc/UTC', 'GMT', 'Etc/GMT'])

/** The IANA name of a zone file (`/usr/share/zoneinfo/Europe/Berlin`, or a link to one), if it is one this runtime knows. */
function zoneOfFile(path: string): string | null {
  if (!isAbsolute(path)) return null
  let real: string
  try {
    real = realpathSync(path)
  } catch {
    return null
  }
  const name = /\/zoneinfo\/(?:posix\/|right\/)?(.+)$/.exec(real)?.[1]
  if (!name) return null
  try {
    return canonicalTimeZone(name)
  } catch {
    return null
  }
}

/**
 * An IANA time zone as the user named it, in its proper case (`europe/berlin` → `Europe/Berlin`,
 * `us/pacific` → `US/Pacific`, `est` → `EST`); 400 `invalid_timezone` when unknown. Another name
 * of the same zone is kept as the name it is: ICU resolves a zone to its oldest name
 * (`Asia/Kolkata` to `Asia/Calcutta`, `Europe/Kyiv` to `Europe/Kiev`), which IANA keeps only as
 * a link, and the user would get back a name they did not type. ICU accepts a name in any case
 * but gives no list of the links' own spellings, so a link's is read from the names of the
 * system's zone files ({@link zoneFileNames}); where there are none (Windows), it is kept as typed.
 */
export function canonicalTimeZone(zone: string): string {
  let resolved: string
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone
  } catch {
    throw new EngineError('invalid_timezone', `timezone: ${JSON.stringify(zone)} is not a time zone this host knows (an IANA name such as Europe/Berlin, America/New_York or UTC)`)
  }
  if (resolved.toLowerCase() === zone.toLowerCase()) return resolved
  return zoneFileNames().get(zone.toLowerCase()) ?? zone
}

/** Where the system keeps its zone files: `TZDIR`, as glibc reads it, else the usual place. */
const zoneInfoDir = () => process.env.TZDIR || '/usr/share/zoneinfo'

/** The names {@link zoneFileNames} read, and the folder they were read from. */
let zoneNames: { dir: string; byLowerCase: Map<string, string> } | null = null

/**
 * The names of the system's zone files, by their lower case (`us/pacific` → `US/Pacific`): every
 * zone and link of the IANA database the OS ships, read once. The `posix/` and `right/` copies
 * and `localtime` are not names of their own; the tables among the files (`zone.tab`) are no
 * zone ICU would accept, so they are never asked for.
 */
function zoneFileNames(): Map<string, string> {
  const dir = zoneInfoDir()
  if (zoneNames?.dir === dir) return zoneNames.byLowerCase
  const byLowerCase = new Map<string, string>()
  zoneNames = { dir, byLowerCase }
  let files: string[]
  try {
    files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
  } catch {
    return byLowerCase // no zone files here: names are kept as typed
  }
  for (const file of files) {
    const name = file.split(sep).join('/')
    if (/^(posix|right)\//.test(name) || name === 'localtime') continue
    byLowerCase.set(name.toLowerCase(), name)
  }
  return byLowerCase
}

/**
 * A cron expression as croner reads it, in a time zone: 5 fields (minute hour day month
 * weekday), 6 (seconds first) or 7 (seconds first, year last), or a nickname such as `@daily`.
 * Day of month and day of week match when either does, as in Vixie cron. 400 `invalid_cron` or
 * `invalid_timezone` with the reason.
 */
export function parseCron(cron: string, timezone: string): Cron {
  return remembered(parsedCrons, `${timezone}\n${cron}`, () => readCron(cron, timezone))
}

/**
 * How many parsed expressions, and lists of upcoming firings, are kept: more than a host has
 * schedules, so that a list read or a firing pass does the cron work of none it did before (1–3
 * ms each; a host with a thousand schedules would stall for seconds).
 */
const REMEMBERED = 4096

/** `make()`'s value for `key`, kept in `map`; the oldest kept goes past {@link REMEMBERED}. A throw keeps nothing. */
function remembered<V>(map: Map<string, V>, key: string, make: () => V): V {
  const kept = map.get(key)
  if (kept !== undefined) return kept
  const value = make()
  if (map.size >= REMEMBERED) map.delete(map.keys().next().value!)
  map.set(key, value)
  return value
}

/**
 * The expressions read, by zone and text. A Cron made paused and never started holds no state a
 * computation changes: every use here passes the moment to reckon from, so one serves them all.
 */
const parsedCrons = new Map<string, Cron>()

function readCron(cron: string, timezone: string): Cron {
  let parsed: Cron
  try {
    parsed = new Cron(cron, { timezone, paused: true })
  } catch (error) {
    throw new EngineError('invalid_cron', `cron: ${cronReason(error)}`)
  }
  try {
    parsed.nextRun(new Date(0)) // croner reads the time zone only when it computes a time
  } catch (error) {
    canonicalTimeZone(timezone) // an unknown zone: invalid_timezone, naming it
    throw new EngineError('invalid_cron', `cron: ${cronReason(error)}`)
  }
  return parsed
}

/**
 * Each field croner names when a value is out of range: what to call it, what it allows, and what
 * to add to croner's value to get the one written (croner counts days and months from 0).
 */
const CRON_FIELDS: Record<string, { name: string; range: string; offset: number }> = {
  second: { name: 'second', range: '0–59', offset: 0 },
  minute: { name: 'minute', range: '0–59', offset: 0 },
  hour: { name: 'hour', range: '0–23', offset: 0 },
  day: { name: 'day of month', range: '1–31', offset: 1 },
  month: { name: 'month', range: '1–12', offset: 1 },
  dayOfWeek: { name: 'day of week', range: '0–7, 0 and 7 Sunday', offset: 0 },
}

/** The refusal of a lone L in day of week, which croner words as "dayOfWeek is not a number: 'L'". */
const LONE_WEEKDAY_L =
  'day of week L: a lone L (the last day of the month) belongs to day of month (0 0 L * *); in day of week it follows a weekday (5L, the last Friday)'

/**
 * croner's reason without its prefix, in the expression's own terms: `* * * 13 *` is "month 13 is
 * out of range (1–12)", where croner says "CronPattern: Invalid value for month: 12".
 */
function cronReason(error: unknown): string {
  const reason = String((error as Error)?.message ?? error).replace(/^Cron\w*:\s*/, '')
  // croner reads a weekday's L only after a weekday (5L): a lone L, which belongs to the other day
  // field, is "not a number" in its words, which does not say where the L goes.
  if (reason === "dayOfWeek is not a number: 'L'") return LONE_WEEKDAY_L
  const outOfRange = /^Invalid value for (\w+): (-?\d+)$/.exec(reason)
  const field = outOfRange ? CRON_FIELDS[outOfRange[1]!] : undefined
  if (!outOfRange || !field) return reason
  return `${field.name} ${Number(outOfRange[2]) + field.offset} is out of range (${field.range})`
}

/** The first firing strictly after `after`, or null when the expression never fires again. */
export function fireTimeAfter(cron: Cron, after: number): number | null {
  return cron.nextRun(new Date(after))?.getTime() ?? null
}

/** The `count` firings from `first` (included) on; none when `first` is null. */
export function upcomingFireTimes(cron: Cron, first: number | null, count: number): number[] {
  if (first === null || count < 1) return []
  return [first, ...cron.nextRuns(count - 1, new Date(first)).map((date) => date.getTime())]
}

/** The firing due at some moment, and where the schedule goes on from. */
export interface DueFiring {
  /** The firing to run: the latest one due. */
  fire_at: number
  /** The schedule's next firing after this one (strictly after `now`), or null if there is none. */
  next_fire_at: number | null
  /** Earlier firings were due too (the host was down, asleep, or late) and are passed over. */
  caught_up: boolean
}

/**
 * The firing decision. Given the earliest firing not yet handled (`nextFireAt`), which one is
 * due at `now`: none before `nextFireAt`; otherwise exactly one, the latest firing at or before
 * `now`. Firings missed while the host was down (or asleep, or busy) are never run one by one:
 * they collapse into this one catch-up run, and the schedule goes on from the first firing after
 * `now`.
 */
export function dueFiring(cron: Cron, nextFireAt: number | null, now: number): DueFiring | null {
  if (nextFireAt === null || nextFireAt > now) return null
  const around = firingsAround(cron, now)
  const fireAt = Math.max(around.latest ?? nextFireAt, nextFireAt)
  return { fire_at: fireAt, next_fire_at: around.next, caught_up: fireAt > nextFireAt }
}

/** The firings around a moment: the latest at or before it (if any), and the first after it. */
interface FiringsAround {
  now: number
  latest: number | null
  next: number | null
}

/**
 * Each expression's firings around the last moment asked: a firing pass asks each of its due
 * schedules at one moment, and schedules share their expressions (every minute, every hour).
 */
const lastAround = new WeakMap<Cron, FiringsAround>()

function firingsAround(cron: Cron, now: number): FiringsAround {
  const kept = lastAround.get(cron)
  if (kept?.now === now) return kept
  // croner's previousRuns excludes its reference: `now + 1` includes a firing at `now` itself.
  const around = { now, latest: cron.previousRuns(1, new Date(now + 1))[0]?.getTime() ?? null, next: fireTimeAfter(cron, now) }
  lastAround.set(cron, around)
  return around
}

// ---------------------------------------------------------------------------------------------
// Validation

function checkName(name: unknown): string {
  if (typeof name !== 'string' || !SCHEDULE_NAME.test(name)) {
    throw invalid('name: 1 to 200 ASCII letters, digits, ".", "_", ":" or "-", starting with a letter or digit')
  }
  return name
}

function checkOverlap(overlap: unknown): Overlap {
  if (!OVERLAP_POLICIES.includes(overlap as Overlap)) throw invalid(`overlap: must be one of ${OVERLAP_POLICIES.join(', ')}`)
  return overlap as Overlap
}

/**
 * A job template passes the rules a submit would apply now, so a schedule that is accepted can
 * fire: the submit's own checks, and a cost within the total capacity. Errors name `job.<field>`.
 * A `payload: null` is stored as `{}`, as a submit stores it: the schedule shows the payload its
 * jobs get.
 */
function checkTemplate(template: JobTemplate, totalUnits: number): JobTemplate {
  if (template === null || typeof template !== 'object' || Array.isArray(template)) throw invalid('job: must be an object with job_type and cost_units')
  if ('idempotency_key' in template && template.idempotency_key != null) {
    throw invalid('job.idempotency_key: a schedule makes a new job at each firing, so its jobs take no idempotency key')
  }
  try {
    checkSubmit(template)
    if (template.cost_units > totalUnits) throw costExceedsCapacity(template.cost_units, totalUnits)
  } catch (error) {
    if (error instanceof EngineError) throw new EngineError(error.code, `job.${error.detail}`)
    throw error
  }
  return template.payload === null ? { ...template, payload: {} } : template
}

/** The expression in its zone, and that it fires at least once more after `now` (400 otherwise). */
function checkFires(cron: string, timezone: string, now: number): Cron {
  if (typeof cron !== 'string' || cron.trim() === '' || cron.length > 200) throw new EngineError('invalid_cron', 'cron: must be a cron expression of 1 to 200 characters')
  const parsed = parseCron(cron.trim(), timezone)
  if (fireTimeAfter(parsed, now) === null) throw new EngineError('invalid_cron', `cron: ${cron} never fires after ${new Date(now).toISOString()}`)
  return parsed
}

// ---------------------------------------------------------------------------------------------
// Reads

function findRow(ctx: EngineContext, name: string): ScheduleRow | undefined {
  return ctx.one<ScheduleRow>('SELECT * FROM schedules WHERE name = ?', name)
}

function getRow(ctx: EngineContext, name: string): ScheduleRow {
  const row = findRow(ctx, name)
  if (!row) throw scheduleNotFound(name)
  return row
}

/**
 * Refuses a write made from a read of another revision than the schedule's now (412
 * `precondition_failed`): its settings changed since, and the write would undo that change
 * unseen. Checked in the transaction that writes, so no change can come between.
 */
function checkRevision(row: ScheduleRow, expected: ExpectedRevisions | undefined): void {
  if (expected === undefined || expected.includes(row.revision)) return
  const named = expected.length === 0 ? 'a revision it never had' : `revision ${expected.join(' or ')}`
  throw new EngineError(
    'precondition_failed',
    `Schedule ${row.name} changed since it was read (the request was made from ${named}; it is at revision ${row.revision}): read it again and make the change over what it holds now`,
  )
}

/** The state of a run's job, or null when it made none or the job is gone (pruned). */
const runJobState = (ctx: EngineContext, jobId: string | null): JobState | null =>
  jobId === null ? null : ((findJob(ctx, jobId)?.state as JobState | undefined) ?? null)

/**
 * The schedule's last firing: the run made last, by the order its rows were made (`seq`), never
 * the latest fire time. A clock set back makes firings earlier than one already made, and the
 * run of that "future" firing is not the last any more once a later one is made.
 */
function lastRun(ctx: EngineContext, scheduleId: string): ScheduleRun | null {
  const row = ctx.one<ScheduleRunRow>('SELECT * FROM schedule_runs WHERE schedule_id = ? ORDER BY seq DESC LIMIT 1', scheduleId)
  if (!row) return null
  return { fire_at: row.fire_at, outcome: row.outcome as RunOutcome, reason: row.reason, job_id: row.job_id, job_state: runJobState(ctx, row.job_id) }
}

/** Each schedule's upcoming firings, by its expression, zone and next firing, which alone decide them. */
const upcomingTimes = new Map<string, readonly number[]>()

/** The schedule's next {@link UPCOMING} firings (throws when its expression cannot be read). */
function upcomingOf(row: ScheduleRow): number[] {
  const key = `${row.timezone}\n${row.cron}\n${row.next_fire_at}`
  return [...remembered(upcomingTimes, key, () => upcomingFireTimes(parseCron(row.cron, row.timezone), row.next_fire_at, UPCOMING))]
}

function decode(ctx: EngineContext, row: ScheduleRow): Schedule {
  let upcoming: number[] = []
  let readable = true
  try {
    upcoming = upcomingOf(row)
  } catch {
    // An expression this host can no longer read (a time zone its ICU data dropped): no upcoming times.
    readable = false
  }
  const state: ScheduleState = row.enabled !== 1 ? 'paused' : row.next_fire_at !== null ? 'enabled' : readable ? 'finished' : 'stopped'
  return {
    id: row.id,
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    job: parseStored(row.job) as JobTemplate,
    overlap: row.overlap as Overlap,
    enabled: row.enabled === 1,
    state,
    next_fire_at: row.next_fire_at,
    next_fire_times: upcoming,
    last_run: lastRun(ctx, row.id),
    revision: row.revision,
    created_at: row.created_at,
    updated_at: row.updated_at,
  }
}

export function getSchedule(ctx: EngineContext, name: string): Schedule {
  return decode(ctx, getRow(ctx, name))
}

/** Every schedule, by name. */
export function listSchedules(ctx: EngineContext): Schedule[] {
  return ctx.all<ScheduleRow>('SELECT * FROM schedules ORDER BY name').map((row) => decode(ctx, row))
}

/**
 * Re-aims each enabled schedule whose next firing lies past its expression's first firing after
 * now, at that firing: the wall clock was set back (NTP correcting a clock that ran fast, a clock
 * set wrong), and the stored next firing was reckoned on the clock as it was, so the schedule
 * would wait out the difference. While the clock only moves on, a next firing is never past that
 * first one, and nothing moves. A firing already made (its run recorded) is not made again when
 * the clock comes round to it. Returns how many schedules moved.
 */
export function reaimSchedules(ctx: EngineContext): number {
  return ctx.transact(() => {
    const now = ctx.clock.now()
    let moved = 0
    for (const row of ctx.all<ScheduleRow>('SELECT * FROM schedules WHERE enabled = 1 AND next_fire_at > ?', now)) {
      let first: number | null
      try {
        first = fireTimeAfter(parseCron(row.cron, row.timezone), now)
      } catch {
        continue // a zone this host no longer knows: its firing pass stops it, saying why
      }
      if (first === null || first >= row.next_fire_at!) continue
      ctx.run('UPDATE schedules SET next_fire_at = ? WHERE id = ?', first, row.id)
      moved += 1
    }
    return moved
  })
}

/** When the earliest enabled schedule fires next, or null: the one moment a timer needs. */
export function nextScheduleFireAt(ctx: EngineContext): number | null {
  return ctx.one<{ at: number | null }>('SELECT MIN(next_fire_at) AS at FROM schedules WHERE enabled = 1')?.at ?? null
}

/** The schedule firing that made each of these jobs (jobs no schedule made are left out). */
export function scheduleOrigins(ctx: EngineContext, jobIds: readonly string[]): Map<string, ScheduleOrigin> {
  const origins = new Map<string, ScheduleOrigin>()
  if (jobIds.length === 0) return origins
  const rows = ctx.all<{ job_id: string; schedule_name: string; fire_at: number }>(
    `SELECT job_id, schedule_name, fire_at FROM schedule_runs WHERE job_id IN (SELECT value FROM json_each(?))`,
    JSON.stringify(jobIds),
  )
  for (const row of rows) origins.set(row.job_id, { name: row.schedule_name, fire_at: row.fire_at })
  return origins
}

// ---------------------------------------------------------------------------------------------
// Verbs

/** Creates a schedule; 409 `duplicate_schedule` if the name is taken. It fires first at its first firing after now. */
export function createSchedule(ctx: EngineContext, capacity: CapacityStore, input: ScheduleInput): Schedule {
  const name = checkName(input.name)
  const timezone = canonicalTimeZone(input.timezone ?? localTimeZone())
  const now = ctx.clock.now()
  const cron = checkFires(input.cron, timezone, now)
  const job = checkTemplate(input.job, capacity.totalUnits())
  const overlap = checkOverlap(input.overlap ?? 'allow')
  const enabled = input.enabled ?? true
  return ctx.transact(() => {
    if (findRow(ctx, name)) throw new EngineError('duplicate_schedule', `A schedule named ${name} exists`)
    const row: ScheduleRow = {
      id: newId(),
      name,
      cron: input.cron.trim(),
      timezone,
      job: JSON.stringify(job),
      overlap,
      enabled: enabled ? 1 : 0,
      next_fire_at: enabled ? fireTimeAfter(cron, now) : null,
      revision: 1,
      created_at: now,
      updated_at: now,
    }
    ctx
      .stmt(
        `INSERT INTO schedules (id, name, cron, timezone, job, overlap, enabled, next_fire_at, revision, created_at, updated_at)
         VALUES (@id, @name, @cron, @timezone, @job, @overlap, @enabled, @next_fire_at, @revision, @created_at, @updated_at)`,
      )
      .run(row)
    ctx.appendEvent('SCHEDULE', row.id, 'SCHEDULE_CREATED', {
      name,
      cron: row.cron,
      timezone,
      overlap,
      enabled,
      job_type: job.job_type,
      next_fire_at: row.next_fire_at,
    })
    return decode(ctx, row)
  })
}

/**
 * A stored expression in its zone, or null when this host can no longer read it (a time zone its
 * ICU data has since dropped): it was valid when stored, so the schedule is stopped, not refused.
 */
function storedCron(cron: string, timezone: string): Cron | null {
  try {
    return parseCron(cron, timezone)
  } catch {
    return null
  }
}

/**
 * Changes a schedule. A new expression or zone, or enabling it, sets its next firing to the first
 * after now: firings that fell while it was disabled are not caught up. Disabling it clears its
 * next firing, so it cannot fire until enabled again. Only the fields whose value changes count:
 * a change that gives every field its value in force writes nothing and logs no event (a script
 * that applies its settings at every start leaves the log as it was), and `SCHEDULE_UPDATED`
 * names the fields that did change. A change to its settings (not enabling it) makes a new
 * revision; `expected` refuses a change made from another ({@link checkRevision}).
 */
export function updateSchedule(ctx: EngineContext, capacity: CapacityStore, name: string, change: ScheduleChange, expected?: ExpectedRevisions): Schedule {
  const given = CHANGEABLE.filter((key) => change[key] !== undefined)
  if (given.length === 0) throw invalid('(body): give at least one of cron, timezone, job, overlap, enabled')
  return ctx.transact(() => {
    const row = getRow(ctx, name)
    checkRevision(row, expected)
    const now = ctx.clock.now()
    const timezone = change.timezone !== undefined ? canonicalTimeZone(change.timezone ?? localTimeZone()) : row.timezone
    const cronText = change.cron !== undefined ? change.cron.trim() : row.cron
    const job = change.job !== undefined ? checkTemplate(change.job, capacity.totalUnits()) : null
    const overlap = change.overlap !== undefined ? checkOverlap(change.overlap) : (row.overlap as Overlap)
    const enabled = change.enabled ?? row.enabled === 1
    const retimed = cronText !== row.cron || timezone !== row.timezone
    // The next firing moves only when the timing changes or the schedule is enabled again. A new
    // timing must fire; an old one enabled again may have no firing left, or no longer be
    // readable here: the schedule is then finished, or stopped, as it would be had it stayed
    // enabled (pausing and resuming gives back the state it had).
    const resumed = enabled && row.enabled === 0
    const cron = retimed ? checkFires(cronText, timezone, now) : resumed ? storedCron(cronText, timezone) : null
    const next = !enabled ? null : cron ? fireTimeAfter(cron, now) : row.next_fire_at
    const jobText = job ? JSON.stringify(job) : row.job
    const differs: Record<(typeof CHANGEABLE)[number], boolean> = {
      cron: cronText !== row.cron,
      timezone: timezone !== row.timezone,
      // The same template with its fields in another order is the template in force.
      job: jobText !== row.job && !isDeepStrictEqual(job, parseStored(row.job)),
      overlap: overlap !== row.overlap,
      enabled: enabled !== (row.enabled === 1),
    }
    const changed = given.filter((key) => differs[key])
    if (changed.length === 0) return decode(ctx, row)
    const updated: ScheduleRow = {
      ...row,
      cron: cronText,
      timezone,
      job: jobText,
      overlap,
      enabled: enabled ? 1 : 0,
      next_fire_at: next,
      revision: changed.some((key) => (REVISED as readonly string[]).includes(key)) ? row.revision + 1 : row.revision,
      updated_at: now,
    }
    ctx
      .stmt(
        `UPDATE schedules SET cron = @cron, timezone = @timezone, job = @job, overlap = @overlap, enabled = @enabled,
           next_fire_at = @next_fire_at, revision = @revision, updated_at = @updated_at WHERE id = @id`,
      )
      .run(updated)
    ctx.appendEvent('SCHEDULE', row.id, 'SCHEDULE_UPDATED', { name, changed, enabled, next_fire_at: next })
    return decode(ctx, updated)
  })
}

/** The runs of schedule `?` that hold no job, or whose job is gone. */
export const JOBLESS_RUNS_SQL = `DELETE FROM schedule_runs WHERE schedule_id = ? AND (job_id IS NULL OR NOT ${jobExistsSql('schedule_runs.job_id')})`

/**
 * Deletes a schedule and answers it as it was. The runs that made a job still kept stay, to say
 * which schedule made it, and go with their jobs (prune.ts); the others go now. `expected`
 * refuses a delete made from a read of another revision ({@link checkRevision}).
 */
export function deleteSchedule(ctx: EngineContext, name: string, expected?: ExpectedRevisions): Schedule {
  return ctx.transact(() => {
    const row = getRow(ctx, name)
    checkRevision(row, expected)
    const schedule = decode(ctx, row)
    ctx.run('DELETE FROM schedules WHERE id = ?', row.id)
    ctx.run(JOBLESS_RUNS_SQL, row.id)
    ctx.appendEvent('SCHEDULE', row.id, 'SCHEDULE_DELETED', { name })
    return schedule
  })
}

/** The job of the schedule's last firing that made one (made last, as {@link lastRun}), if it has not finished (a pruned job has). */
function unfinishedRun(ctx: EngineContext, scheduleId: string): string | null {
  const row = ctx.one<{ job_id: string }>(
    "SELECT job_id FROM schedule_runs WHERE schedule_id = ? AND outcome = 'FIRED' ORDER BY seq DESC LIMIT 1",
    scheduleId,
  )
  const state = row ? runJobState(ctx, row.job_id) : null
  return state !== null && !TERMINAL_STATES.has(state) ? row!.job_id : null
}

function recordRun(ctx: EngineContext, row: ScheduleRow, firing: Firing): void {
  ctx
    .stmt(
      `INSERT INTO schedule_runs (schedule_id, fire_at, schedule_name, outcome, job_id, reason, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    )
    .run(row.id, firing.fire_at, row.name, firing.outcome, firing.job_id, firing.reason, ctx.clock.now())
}

/**
 * Handles the due firing of one schedule (see {@link dueFiring}): moves `next_fire_at` past
 * now, then records the firing under its key and submits its job, or records it SKIPPED (the
 * last run is unfinished and overlap is `skip`, or the submit was refused). Null when nothing
 * was due, or this firing was already handled.
 */
function fireSchedule(ctx: EngineContext, capacity: CapacityStore, row: ScheduleRow, now: number): Firing | null {
  let cron: Cron
  try {
    cron = parseCron(row.cron, row.timezone)
  } catch (error) {
    // Stored, so it was valid once (a time zone the host's ICU data has since dropped): it stops
    // until edited rather than failing every pass of the timer.
    ctx.run('UPDATE schedules SET next_fire_at = NULL WHERE id = ?', row.id)
    const reason = error instanceof EngineError ? error.detail : String(error)
    ctx.appendEvent('SCHEDULE', row.id, 'SCHEDULE_SKIPPED', { name: row.name, fire_at: row.next_fire_at, reason })
    return null
  }
  const due = dueFiring(cron, row.next_fire_at, now)
  if (!due) return null
  ctx.run('UPDATE schedules SET next_fire_at = ? WHERE id = ?', due.next_fire_at, row.id)
  if (ctx.one('SELECT 1 FROM schedule_runs WHERE schedule_id = ? AND fire_at = ?', row.id, due.fire_at)) return null
  const base = { name: row.name, fire_at: due.fire_at }
  const missed = due.caught_up ? { caught_up: true as const, missed_from: row.next_fire_at } : {}
  let firing: Firing
  const running = row.overlap === 'skip' ? unfinishedRun(ctx, row.id) : null
  if (running) {
    firing = { ...base, outcome: 'SKIPPED', job_id: null, reason: `overlap: the last run's job ${running} has not finished` }
    recordRun(ctx, row, firing)
    ctx.appendEvent('SCHEDULE', row.id, 'SCHEDULE_SKIPPED', { ...base, reason: 'overlap', running_job_id: running, ...missed })
    return firing
  }
  // The very submit verb, under a savepoint of its own: a refusal undoes only the submit.
  const submitted = ctx.settle(() => submit(ctx, parseStored(row.job) as JobTemplate, capacity.totalUnits()))
  if (submitted.ok) {
    const job: JobRow = submitted.value.job
    firing = { ...base, outcome: 'FIRED', job_id: job.id, reason: null }
    recordRun(ctx, row, firing)
    recordJobEvent(ctx, job, {
      type: 'SCHEDULE_FIRED',
      entity: 'SCHEDULE',
      entityId: row.id,
      data: { ...base, job_id: job.id, next_fire_at: due.next_fire_at, ...missed },
    })
    return firing
  }
  if (!(submitted.error instanceof EngineError)) throw submitted.error
  const { code, detail } = submitted.error
  firing = { ...base, outcome: 'SKIPPED', job_id: null, reason: `${code}: ${detail}` }
  recordRun(ctx, row, firing)
  ctx.appendEvent('SCHEDULE', row.id, 'SCHEDULE_SKIPPED', { ...base, reason: code, detail, ...missed })
  return firing
}

/**
 * Fires every enabled schedule that is due now, each at most once (its latest due firing), in
 * one transaction. Calling it again at the same moment, from a second timer or after a restart,
 * finds nothing due: the firings are handled and their schedules moved on.
 */
export function fireDueSchedules(ctx: EngineContext, capacity: CapacityStore): Firing[] {
  return ctx.transact(() => {
    const now = ctx.clock.now()
    const due = ctx.all<ScheduleRow>('SELECT * FROM schedules WHERE enabled = 1 AND next_fire_at <= ? ORDER BY next_fire_at, name', now)
    return due.map((row) => fireSchedule(ctx, capacity, row, now)).filter((firing): firing is Firing => firing !== null)
  })
}
