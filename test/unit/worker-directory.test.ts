/**
 * The workers the host lists (GET /api/workers, leasehold status, the dashboard's Workers view):
 * a worker of another process or machine that is no longer heard from is shown silent, then
 * forgotten; one holding a lease, and the host's own local workers, are not.
 */
import { expect, test } from 'vitest'
import { FORGOTTEN_AFTER_MS, SILENT_AFTER_MS, WorkerDirectory } from '../../src-main/worker-roster/directory'
import { aJob, setup } from '../helpers/engine'
import { claimOrFail } from './support'

/** A walk of a line that no add-on or limit of units narrows. */
const walk = (gpu: boolean, jobTypes: string[] | null) => ({ gpu, jobTypes, addon: null, maxUnits: null })

test('an external or remote worker not heard from for twice the longest claim wait is silent, and after an hour of silence it is forgotten', () => {
  const { engine, clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  directory.seen('http-1')
  directory.update('redis-1', { kind: 'redis', state: 'active' })
  directory.update('local-1', { kind: 'local', state: 'ready', pid: 42 })
  const states = () => Object.fromEntries(directory.list(engine).map((w) => [w.worker_id, w.state]))
  expect(states()).toEqual({ 'http-1': 'active', 'redis-1': 'active', 'local-1': 'ready' })

  clock.advance(SILENT_AFTER_MS - 1)
  expect(states()).toEqual({ 'http-1': 'active', 'redis-1': 'active', 'local-1': 'ready' })
  directory.seen('http-1') // its next claim
  clock.advance(1)
  expect(states()).toEqual({ 'http-1': 'active', 'redis-1': 'silent', 'local-1': 'ready' })

  clock.advance(FORGOTTEN_AFTER_MS)
  expect(states()).toEqual({ 'local-1': 'ready' })
})

test('a quiet worker that still holds a lease is listed busy, not silent: its lease says whether it is alive', () => {
  const { engine, clock } = setup({ config: { leaseTtlS: 3600 } })
  const directory = new WorkerDirectory(() => clock.now())
  engine.submit(aJob())
  claimOrFail(engine, 'http-1')
  directory.seen('http-1')
  clock.advance(FORGOTTEN_AFTER_MS)
  expect(directory.list(engine)).toEqual([expect.objectContaining({ worker_id: 'http-1', state: 'busy' })])
})

test('what no worker takes: workers are at hand and each that still works named its queues and types in a claim, without this job’s', () => {
  const { clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  const resize = { queue: 'default', job_type: 'resize', addon_id: null, cost_units: 1, gpu_required: false }
  const takes = (streams: string[] | null, jobTypes: string[] | null) => ({ streams, jobTypes, gpu: false })
  expect(directory.nobodyTakes(resize)).toBeNull() // no worker at all: the job waits for any
  directory.update('local-1', { kind: 'local', state: 'ready', pid: 42 })
  expect(directory.nobodyTakes(resize)).toBeNull() // it has claimed nothing yet: it may take anything
  directory.claims('local-1', takes(['default'], ['thumbnail']))
  directory.seen('http-1')
  directory.claims('http-1', takes(['reports'], ['resize']))
  expect(directory.nobodyTakes(resize)).toBe('job_type') // the one that runs it takes another queue
  expect(directory.nobodyTakes({ ...resize, queue: 'reports' })).toBeNull()
  expect(directory.nobodyTakes({ ...resize, queue: 'other' })).toBe('queue')
  // The only worker that runs it in its queue goes silent: nobody at hand does.
  directory.seen('http-2')
  directory.claims('http-2', takes(['default'], ['resize']))
  expect(directory.nobodyTakes(resize)).toBeNull()
  clock.advance(SILENT_AFTER_MS)
  directory.seen('http-1')
  expect(directory.nobodyTakes(resize)).toBe('job_type')
  // A claim that names no types or queues: that worker takes any.
  directory.claims('http-1', takes(null, null))
  expect(directory.nobodyTakes(resize)).toBeNull()
  directory.forget('http-1')
  expect(directory.nobodyTakes(resize)).toBe('job_type')
  // A worker the directory does not know is not asked.
  directory.claims('unknown', takes(null, null))
  expect(directory.nobodyTakes(resize)).toBe('job_type')
})

test('what no worker takes: a job needing a GPU, while none of the workers that take its queue and type has one', () => {
  const { clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  const render = { queue: 'default', job_type: 'render', addon_id: null, cost_units: 1, gpu_required: true }
  directory.update('local-1', { kind: 'local', state: 'ready', pid: 42 })
  expect(directory.nobodyTakes(render)).toBeNull() // it has claimed nothing yet: it may have one
  directory.claims('local-1', { streams: ['default'], jobTypes: null, gpu: false })
  expect(directory.nobodyTakes(render)).toBe('gpu')
  expect(directory.nobodyTakes({ ...render, gpu_required: false })).toBeNull()
  // One with a GPU that takes another queue does not take it; one that takes its queue does.
  directory.seen('http-gpu')
  directory.claims('http-gpu', { streams: ['other'], jobTypes: null, gpu: true })
  expect(directory.nobodyTakes(render)).toBe('gpu')
  directory.claims('http-gpu', { streams: ['default'], jobTypes: null, gpu: true })
  expect(directory.nobodyTakes(render)).toBeNull()
  directory.forget('http-gpu')
  // A worker of the pull or queue API takes every queue: only one that has a GPU takes this job.
  directory.askedForWork('pull-1', { jobTypes: null, gpu: false })
  expect(directory.nobodyTakes(render)).toBe('gpu')
  directory.askedForWork('pull-gpu', { jobTypes: null, gpu: true })
  expect(directory.nobodyTakes(render)).toBeNull()
  clock.advance(SILENT_AFTER_MS)
  directory.askedForWork('pull-1', { jobTypes: null, gpu: false })
  expect(directory.nobodyTakes(render)).toBe('gpu')
})

test('how lines are walked: a worker known to have no GPU skips the jobs that need one, one that names job types the other types; the walks that skip the most come first', () => {
  const { clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  const resize = { queue: 'default', job_type: 'resize', addon_id: null, cost_units: 1, gpu_required: false }
  expect(directory.walks(resize)).toEqual([]) // no worker at all
  directory.update('local-1', { kind: 'local', state: 'ready', pid: 42 })
  expect(directory.walks(resize)).toEqual([walk(true, null)]) // it has claimed nothing yet: it may take anything
  directory.claims('local-1', { streams: ['default'], jobTypes: null, gpu: true })
  expect(directory.walks(resize)).toEqual([walk(true, null)])
  // One that takes another queue, or other types, does not walk this line; one that takes both does.
  directory.seen('http-1')
  directory.claims('http-1', { streams: ['other'], jobTypes: null, gpu: false })
  expect(directory.walks(resize)).toEqual([walk(true, null)])
  directory.claims('http-1', { streams: ['default'], jobTypes: ['thumbnail'], gpu: false })
  expect(directory.walks(resize)).toEqual([walk(true, null)])
  directory.claims('http-1', { streams: ['default'], jobTypes: ['thumbnail', 'resize'], gpu: true })
  expect(directory.walks(resize)).toEqual([walk(true, ['resize', 'thumbnail']), walk(true, null)])
  directory.claims('http-1', { streams: ['default'], jobTypes: null, gpu: false })
  expect(directory.walks(resize)).toEqual([walk(false, null), walk(true, null)])
  // A job needing a GPU is walked only by those that have one.
  expect(directory.walks({ ...resize, gpu_required: true })).toEqual([walk(true, null)])
  // It goes silent: it walks no line.
  clock.advance(SILENT_AFTER_MS)
  expect(directory.walks(resize)).toEqual([walk(true, null)])
  // A worker of the pull or queue API takes every queue and type, while it asks.
  directory.forget('local-1')
  expect(directory.walks(resize)).toEqual([])
  directory.askedForWork('pull-1', { jobTypes: null, gpu: false })
  expect(directory.walks(resize)).toEqual([walk(false, null)])
  // None has a GPU: a job needing one is placed in the line each would walk with one.
  expect(directory.walks({ ...resize, gpu_required: true })).toEqual([walk(true, null)])
  clock.advance(SILENT_AFTER_MS)
  expect(directory.walks(resize)).toEqual([])
})

test('what no worker takes, with the pull and queue APIs’ filters: the farthest any worker asking got — its add-on, then its size — and none once one takes it', () => {
  const { clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  const photo = { queue: 'default', job_type: 'resize', addon_id: 'photos', cost_units: 8, gpu_required: false }
  directory.askedForWork('q-music', { jobTypes: null, gpu: false, addonId: 'music' })
  expect(directory.nobodyTakes(photo)).toBe('addon')
  expect(directory.nobodyTakes({ ...photo, addon_id: 'music' })).toBeNull()
  directory.askedForWork('q-photos', { jobTypes: null, gpu: false, addonId: 'photos', maxUnits: 5 })
  expect(directory.nobodyTakes(photo)).toBe('units') // the photos worker takes its add-on, not its size
  expect(directory.nobodyTakes({ ...photo, cost_units: 5 })).toBeNull()
  expect(directory.nobodyTakes({ ...photo, job_type: 'encode', cost_units: 5 })).toBeNull() // a queue API worker naming no types runs any
  directory.askedForWork('q-photos', { jobTypes: ['thumbnail'], gpu: false, addonId: 'photos', maxUnits: 5 })
  // Its last request is what it takes: it runs another type now, and the music worker, which runs
  // any, takes another add-on's jobs: the add-on is as far as any worker gets.
  expect(directory.nobodyTakes({ ...photo, cost_units: 5 })).toBe('addon')
  // A pull worker names no add-on: it takes any add-on's jobs up to its units.
  directory.askedForWork('p-1', { jobTypes: null, gpu: false, maxUnits: 10 })
  expect(directory.nobodyTakes(photo)).toBeNull()
  clock.advance(SILENT_AFTER_MS)
  expect(directory.nobodyTakes(photo)).toBeNull() // nobody asked lately: it waits for any worker
})

test('how lines are walked with those filters: one add-on’s jobs, or none above some units, are skipped apart; the walks that skip the most come first', () => {
  const { clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  const photo = { queue: 'default', job_type: 'resize', addon_id: 'photos', cost_units: 2, gpu_required: false }
  directory.askedForWork('p-small', { jobTypes: null, gpu: true, maxUnits: 4 })
  directory.askedForWork('p-large', { jobTypes: null, gpu: true, maxUnits: 50 })
  directory.askedForWork('q-photos', { jobTypes: ['resize'], gpu: true, addonId: 'photos' })
  directory.askedForWork('q-any', { jobTypes: null, gpu: true })
  directory.askedForWork('q-music', { jobTypes: null, gpu: true, addonId: 'music' }) // does not take it: walks no line of it
  expect(directory.walks(photo)).toEqual([
    { gpu: true, jobTypes: ['resize'], addon: 'photos', maxUnits: null },
    { gpu: true, jobTypes: null, addon: null, maxUnits: 4 },
    { gpu: true, jobTypes: null, addon: null, maxUnits: 50 },
    { gpu: true, jobTypes: null, addon: null, maxUnits: null },
  ])
  expect(directory.walks({ ...photo, cost_units: 40 }).map((walk) => walk.maxUnits)).toEqual([null, 50, null])
})

test('a worker of the pull or queue API that stopped asking stops counting, however many others asked since', () => {
  const { clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  const job = { queue: 'default', job_type: 'resize', addon_id: null, cost_units: 1, gpu_required: false }
  directory.askedForWork('takes-all', { jobTypes: null, gpu: false })
  clock.advance(SILENT_AFTER_MS)
  for (let i = 0; i < 1_000; i++) directory.askedForWork(`photos-${i}`, { jobTypes: null, gpu: false, addonId: 'photos' })
  expect(directory.nobodyTakes(job)).toBe('addon')
  directory.askedForWork('takes-all', { jobTypes: null, gpu: false })
  expect(directory.nobodyTakes(job)).toBeNull()
  expect(directory.walks(job)).toEqual([walk(false, null)])
})
