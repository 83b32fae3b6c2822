/**
 * `leasehold schedule add|edit|list|pause|resume|rm` as a user runs it: the real command against an
 * in-process host (found through --data-dir) on a manual clock, so a firing comes when the test
 * moves the clock.
 */
import type { ChildProcess } from 'node:child_process'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { MINUTE, ManualClock } from '../../src-main/engine/rules/clock'
import { sql } from '../helpers/database'
import { cuttingProxy } from '../helpers/cutting-proxy'
import { startTestHost, type TestHost } from '../helpers/host'
import { runCliAsync } from '../helpers/process'

/** The runner's own LEASEHOLD_* settings must not pick the host. */
const CLEAN_ENV: NodeJS.ProcessEnv = { LEASEHOLD_URL: undefined, LEASEHOLD_TOKEN: undefined, LEASEHOLD_DATA_DIR: undefined }
const T0 = Date.parse('2026-02-06T20:10:00.000Z')

let host: TestHost
const clock = new ManualClock(T0)
const children: ChildProcess[] = []

beforeAll(async () => {
  host = await startTestHost({ workers: 0, totalUnits: 20 }, { clock })
})
afterAll(async () => {
  await host.dispose()
})
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
  for (const schedule of host.engine.listSchedules()) host.engine.deleteSchedule(schedule.name)
})

const cli = (args: string[]) => runCliAsync([...args, '--data-dir', host.dataDir], CLEAN_ENV, (child) => children.push(child))
const lines = (text: string) => text.trim().split('\n').filter(Boolean)

describe('leasehold schedule', () => {
  test('add creates a schedule with its job; list shows its zone, state, overlap and next firing, one column each', async () => {
    const added = await cli([
      'schedule', 'add', 'nightly', '--cron', '0 2 * * *', '--tz', 'Europe/Berlin', '--type', 'backup',
      '--payload', '{"to": "/mnt"}', '--units', '3', '--priority', 'high', '--queue', 'nightly', '--overlap', 'skip',
    ])
    expect(added.stderr).toBe('')
    expect(added.status).toBe(0)
    expect(added.stdout.trim()).toBe('added nightly; next firing 2026-02-07T01:00:00.000Z')
    expect(host.engine.getSchedule('nightly')).toMatchObject({
      cron: '0 2 * * *',
      timezone: 'Europe/Berlin',
      overlap: 'skip',
      enabled: true,
      job: { job_type: 'backup', cost_units: 3, priority: 'HIGH', queue: 'nightly', payload: { to: '/mnt' } },
    })

    const list = await cli(['schedule', 'list'])
    expect(list.status).toBe(0)
    const [header, row] = lines(list.stdout)
    expect(header).toMatch(/^NAME\s+CRON\s+ZONE\s+STATE\s+OVERLAP\s+NEXT\s+LAST RUN$/)
    expect(row).toMatch(/^nightly\s+0 2 \* \* \*\s+Europe\/Berlin\s+enabled\s+skip\s+2026-02-07T01:00:00.000Z\s+-$/)
    const json = JSON.parse((await cli(['schedule', 'list', '--json'])).stdout)
    expect(json.schedules.map((s: { name: string }) => s.name)).toEqual(['nightly'])
  })

  test('list shows the last run: its fire time, its job and the job\'s state', async () => {
    await cli(['schedule', 'add', 'often', '--cron', '*/5 * * * *', '--tz', 'UTC', '--type', 'tick'])
    clock.set(T0 + 5 * MINUTE)
    await host.engine.run(() => host.engine.fireDueSchedules())
    const [run] = host.engine.listJobs({ job_type: 'tick' }).jobs
    const row = lines((await cli(['schedule', 'list'])).stdout)[1]
    expect(row).toContain(`2026-02-06T20:15:00.000Z job …${run!.id.slice(-8)} QUEUED`)
    host.engine.cancel(run!.id)
  })

  test('pause stops it firing (no next firing); resume goes on from its next firing after now; rm deletes it', async () => {
    await cli(['schedule', 'add', 'hourly', '--cron', '@hourly', '--type', 'tick'])
    const paused = await cli(['schedule', 'pause', 'hourly'])
    expect(paused.stdout.trim()).toBe('paused hourly')
    expect(host.engine.getSchedule('hourly')).toMatchObject({ enabled: false, next_fire_at: null })
    expect(lines((await cli(['schedule', 'list'])).stdout)[1]).toMatch(/^hourly\s+@hourly\s+\S+\s+paused\s+allow\s+-\s+-$/)
    const resumed = await cli(['schedule', 'resume', 'hourly'])
    expect(resumed.stdout.trim()).toMatch(/^resumed hourly; next firing \d{4}-\d\d-\d\dT\d\d:00:00.000Z$/)
    expect(host.engine.getSchedule('hourly').enabled).toBe(true)
    expect((await cli(['schedule', 'rm', 'hourly'])).stdout.trim()).toBe('removed hourly')
    expect(host.engine.listSchedules()).toEqual([])
    expect((await cli(['schedule', 'list'])).stdout.trim()).toBe('no schedules')
  })

  test('a schedule whose cron has no firing left lists as finished, and resume says it fires no more', async () => {
    await cli(['schedule', 'add', 'once', '--cron', '0 30 20 6 2 * 2026', '--tz', 'UTC', '--type', 'tick']) // 20:30:00 on 6 February 2026
    clock.set(T0 + 20 * MINUTE)
    await host.engine.run(() => host.engine.fireDueSchedules())
    expect(lines((await cli(['schedule', 'list'])).stdout)[1]).toMatch(/^once\s+0 30 20 6 2 \* 2026\s+UTC\s+finished\s+allow\s+-\s+2026-02-06T20:30:00.000Z job/)
    const resumed = await cli(['schedule', 'resume', 'once'])
    expect(resumed.status).toBe(0)
    expect(resumed.stdout.trim()).toBe('resumed once; it fires no more: its cron has no firing left (give it one: leasehold schedule edit once --cron …, or remove it)')
    // Paused first, and resumed: the same, not a refusal of a --cron never given.
    expect((await cli(['schedule', 'pause', 'once'])).status).toBe(0)
    const again = await cli(['schedule', 'resume', 'once'])
    expect([again.status, again.stdout.trim()]).toEqual([0, 'resumed once; it fires no more: its cron has no firing left (give it one: leasehold schedule edit once --cron …, or remove it)'])
    host.engine.cancel(host.engine.getSchedule('once').last_run!.job_id!)
  })

  test('a stopped schedule (its zone unreadable here) paused and resumed answers as resume does without the pause: stopped, exit 0', async () => {
    await cli(['schedule', 'add', 'gone', '--cron', '*/10 * * * *', '--tz', 'UTC', '--type', 'tick'])
    sql(host.engine).run("UPDATE schedules SET timezone = 'Mars/Base', next_fire_at = NULL WHERE name = 'gone'")
    const words = 'resumed gone; it does not fire: this host can no longer read its cron or time zone (give it one it reads: leasehold schedule edit gone --tz … or --cron …)'
    const resumed = await cli(['schedule', 'resume', 'gone'])
    expect([resumed.status, resumed.stdout.trim(), resumed.stderr]).toEqual([0, words, ''])
    expect((await cli(['schedule', 'pause', 'gone'])).status).toBe(0)
    const again = await cli(['schedule', 'resume', 'gone'])
    expect([again.status, again.stdout.trim(), again.stderr]).toEqual([0, words, ''])
    expect(host.engine.getSchedule('gone')).toMatchObject({ enabled: true, state: 'stopped', next_fire_at: null })
  })

  test('edit changes only what its flags give, the job\'s other fields kept, and prints the schedule as add does', async () => {
    await cli([
      'schedule', 'add', 'nightly', '--cron', '0 2 * * *', '--tz', 'Europe/Berlin', '--type', 'backup',
      '--payload', '{"to": "/mnt"}', '--units', '3', '--queue', 'nightly', '--overlap', 'skip',
    ])
    const edited = await cli(['schedule', 'edit', 'nightly', '--cron', '0 3 * * *', '--units', '5'])
    expect([edited.status, edited.stderr, edited.stdout.trim()]).toEqual([0, '', 'edited nightly; next firing 2026-02-07T02:00:00.000Z'])
    expect(host.engine.getSchedule('nightly')).toMatchObject({
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      overlap: 'skip',
      enabled: true,
      job: { job_type: 'backup', cost_units: 5, queue: 'nightly', payload: { to: '/mnt' } },
    })
    const zone = await cli(['schedule', 'edit', 'nightly', '--tz', 'UTC', '--overlap', 'allow', '--json'])
    expect(JSON.parse(zone.stdout).schedule).toMatchObject({ cron: '0 3 * * *', timezone: 'UTC', overlap: 'allow', next_fire_at: '2026-02-07T03:00:00.000Z' })
    // A value the host refuses names the flag, exit 2, and changes nothing.
    const bad = await cli(['schedule', 'edit', 'nightly', '--cron', '61 * * * *'])
    expect([bad.status, lines(bad.stderr)]).toEqual([2, ['leasehold: --cron: minute 61 is out of range (0–59) (invalid_cron)']])
    expect(host.engine.getSchedule('nightly').cron).toBe('0 3 * * *')
    const missing = await cli(['schedule', 'edit', 'nope', '--units', '2'])
    expect([missing.status, lines(missing.stderr)]).toEqual([1, ['leasehold: No schedule nope (schedule_not_found)']])
  })

  test('an edit racing another edit keeps both: the other edit, landing between its read and its PATCH, is not undone; the edit is made over it', async () => {
    await cli(['schedule', 'add', 'nightly', '--cron', '0 2 * * *', '--tz', 'UTC', '--type', 'backup', '--payload', '{"to": "/mnt"}', '--units', '3'])
    const seen: string[] = []
    let raced = false
    // Another operator moves the payload once, just before the CLI's first PATCH reaches the host.
    const proxy = await cuttingProxy(host.url, {
      cut: false,
      before: async (method) => {
        seen.push(method)
        if (method !== 'PATCH' || raced) return
        raced = true
        const { job } = host.engine.getSchedule('nightly')
        await host.engine.run(() => host.engine.updateSchedule('nightly', { job: { ...job, payload: { to: '/srv' } } }))
      },
    })
    try {
      const edited = await runCliAsync(['schedule', 'edit', 'nightly', '--units', '5', '--url', proxy.url, '--token', host.token], CLEAN_ENV, (child) => children.push(child))
      expect([edited.status, edited.stderr, edited.stdout.trim()]).toEqual([0, '', 'edited nightly; next firing 2026-02-07T02:00:00.000Z'])
      expect(host.engine.getSchedule('nightly').job).toEqual({ job_type: 'backup', cost_units: 5, payload: { to: '/srv' } })
      // Refused once (412), read again, and made over the fresh read.
      expect(seen).toEqual(['GET', 'PATCH', 'GET', 'PATCH'])
      expect(proxy.statuses()).toEqual([200, 412, 200, 200])
    } finally {
      await proxy.close()
    }
  })

  test('an edit whose schedule changes under each of its tries changes nothing and says so, exit 1', async () => {
    await cli(['schedule', 'add', 'nightly', '--cron', '0 2 * * *', '--tz', 'UTC', '--type', 'backup', '--units', '3'])
    let other = 0
    const proxy = await cuttingProxy(host.url, {
      cut: false,
      before: async (method) => {
        if (method !== 'PATCH') return
        other += 1
        const { job } = host.engine.getSchedule('nightly')
        await host.engine.run(() => host.engine.updateSchedule('nightly', { job: { ...job, payload: { other } } }))
      },
    })
    try {
      const edited = await runCliAsync(['schedule', 'edit', 'nightly', '--units', '5', '--url', proxy.url, '--token', host.token], CLEAN_ENV, (child) => children.push(child))
      expect([edited.status, edited.stdout, lines(edited.stderr)]).toEqual([
        1,
        '',
        ['leasehold: schedule nightly was changed by someone else during each of 3 tries to edit it (another operator or program edits it now): this edit changed nothing; run it again (precondition_failed)'],
      ])
      expect(host.engine.getSchedule('nightly').job).toEqual({ job_type: 'backup', cost_units: 3, payload: { other: 3 } })
    } finally {
      await proxy.close()
    }
  })

  test('edit gives a stopped schedule a zone it reads, as its resume line says: it fires again', async () => {
    await cli(['schedule', 'add', 'gone', '--cron', '0 2 * * *', '--tz', 'UTC', '--type', 'tick'])
    sql(host.engine).run("UPDATE schedules SET timezone = 'Mars/Base', next_fire_at = NULL WHERE name = 'gone'")
    const edited = await cli(['schedule', 'edit', 'gone', '--tz', 'Europe/Berlin'])
    expect([edited.status, edited.stdout.trim()]).toEqual([0, 'edited gone; next firing 2026-02-07T01:00:00.000Z'])
  })

  test.each([
    [['schedule'], 'schedule needs one of add, edit, list, pause, resume, rm'],
    [['schedule', 'every'], 'unknown schedule command "every"'],
    [['schedule', 'add', 'x', '--type', 't'], '--cron is required'],
    [['schedule', 'add', 'x', '--cron', '* * * * *'], '--type is required'],
    [['schedule', 'add', '--cron', '* * * * *', '--type', 't'], 'schedule add needs the schedule\'s NAME'],
    [['schedule', 'add', 'x', '--cron', '* * * * *', '--type', 't', '--overlap', 'maybe'], '--overlap must be allow or skip'],
    [['schedule', 'add', 'x', '--cron', '61 * * * *', '--type', 't'], 'cron: minute 61 is out of range (0–59) (invalid_cron)'],
    [['schedule', 'add', 'x', '--cron', '* * * * *', '--tz', 'Mars/Base', '--type', 't'], '--tz: "Mars/Base" is not a time zone'],
    [['schedule', 'add', 'x', '--cron', '* * * * *', '--type', 't', '--units', '21'], '(cost_exceeds_capacity)'],
    [['schedule', 'add', 'has space', '--cron', '* * * * *', '--type', 't'], 'name:'],
    [['schedule', 'pause'], 'schedule pause needs the schedule\'s NAME'],
    [['schedule', 'pause', ''], 'schedule pause needs the schedule\'s NAME'],
    [['schedule', 'pause', 'x', '--cron', '* * * * *'], '--cron belongs to schedule add'],
    [['schedule', 'list', 'x'], 'schedule list takes no name'],
    [['schedule', 'edit'], 'schedule edit needs the schedule\'s NAME'],
    [['schedule', 'edit', 'x'], 'schedule edit needs what to change: one or more of --cron, --tz, --overlap, --type, --payload, --priority, --units, --queue, --addon, --max-attempts'],
    [['schedule', 'edit', 'x', '--paused'], '--paused belongs to schedule add (pause NAME and resume NAME switch a schedule)'],
    [['schedule', 'edit', 'x', '--overlap', 'maybe'], '--overlap must be allow or skip'],
    [['schedule', 'edit', 'x', '--units', '0'], '--units must be a whole number'],
    [['schedule', 'rm', 'x', 'y'], 'unexpected argument "y"'],
  ])('bad input (%j) is one line and exit 2, and changes nothing', async (args, text) => {
    const result = await cli(args)
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toHaveLength(1)
    expect(result.stderr).toContain(text)
    expect(result.stdout).toBe('')
    expect(host.engine.listSchedules()).toEqual([])
  })

  test('an unknown name or a name already taken is the host\'s refusal as one line, exit 1', async () => {
    const missing = await cli(['schedule', 'pause', 'nope'])
    expect(missing.status).toBe(1)
    expect(lines(missing.stderr)).toEqual(['leasehold: No schedule nope (schedule_not_found)'])
    expect((await cli(['schedule', 'add', 'twice', '--cron', '@daily', '--type', 't'])).status).toBe(0)
    const again = await cli(['schedule', 'add', 'twice', '--cron', '@daily', '--type', 't'])
    expect(again.status).toBe(1)
    expect(lines(again.stderr)).toEqual(['leasehold: A schedule named twice exists (duplicate_schedule)'])
  })

  test('leasehold --help lists schedule; help schedule and schedule --help show its commands and flags', async () => {
    const top = await cli(['--help'])
    expect(top.stdout).toMatch(/^ {2}schedule\s/m)
    for (const args of [['help', 'schedule'], ['schedule', '--help']]) {
      const help = await runCliAsync(args, CLEAN_ENV)
      expect(help.status).toBe(0)
      expect(help.stdout).toContain('Usage: leasehold schedule')
      for (const word of ['add NAME', 'edit NAME', 'list', 'pause NAME', 'resume NAME', 'rm NAME', '--cron', '--tz', '--overlap', '--paused', '--type', '--json', '--url', '--token', '--data-dir']) {
        expect(help.stdout).toContain(word)
      }
    }
  })
})
