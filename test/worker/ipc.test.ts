/**
 * The IPC message registry between the host and its local workers (src-shared/ipc-protocol.ts),
 * both ends of it without processes: the host's answers (answerWorkerRequest) and supervisor,
 * and the worker's IpcTransport. Plus the heartbeat jitter.
 */
import { getEventListeners } from 'node:events'
import { connect } from 'node:net'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { Dispatch } from '../../src-main/dispatch/dispatch'
import { ClockWaiters } from '../../src-main/dispatch/clock-waiters'
import { SECOND } from '../../src-main/engine/rules/clock'
import { answerWorkerRequest, type IpcHostDeps } from '../../src-main/pool/ipc-host'
import { readOnlyAnswer } from '../../src-main/error-answer'
import type { StorageMode } from '../../src-main/db/storage-mode'
import type { WorkerProcess } from '../../src-main/pool/spawn'
import { WorkerPool } from '../../src-main/pool/supervisor'
import { WorkerDirectory } from '../../src-main/worker-roster/directory'
import { MAX_LONG_POLL_MS } from '../../src-main/dispatch/long-poll'
import { FromHost, FromWorker, IPC_METHODS, type IpcRequest, type IpcResponse } from '../../src-shared/ipc-protocol'
import { jitter } from '../../src-worker/runtime'
import { LeaseLostError } from '../../src-worker/transport'
import { HostError } from '../../src-worker/transport'
import { type IpcChannel, IpcTransport } from '../../src-worker/transport-ipc'
import { lineReader } from '../../src-shared/line-reader'
import { MAX_JSON_DEPTH } from '../../src-shared/json-faults'
import { LINK_PATH_ENV, LINK_TOKEN_ENV } from '../../src-shared/thread-link'
import { aJob, setup, T0 } from '../helpers/engine'
import { until } from '../helpers/until'
import { database } from '../helpers/database'

describe('the message registry', () => {
  const good: unknown[] = [
    { type: 'ready', worker_id: 'local-1.1', types: ['sleep', 'exec'] },
    { type: 'request', id: 1, method: 'exchange', params: { worker_id: 'w', claim: { streams: ['default'], max_jobs: 4, max_wait_ms: 0 } } },
    { type: 'request', id: 2, method: 'report', params: {} }, // params are checked per method by the host
  ]
  const malformed: unknown[] = [
    null,
    'ready',
    42,
    [],
    {},
    { type: 'hello' },
    { type: 'ready' },
    { type: 'ready', worker_id: '', types: [] },
    { type: 'ready', worker_id: 'w', types: 'sleep' },
    { type: 'job', job_id: 'j1' }, // a notice the host derives itself now
    { type: 'request', id: 1, method: 'steal', params: {} },
    { type: 'request', id: 1, method: 'claim', params: {} }, // one round trip, exchange, carries claims now
    { type: 'request', id: 1.5, method: 'exchange', params: {} },
    { type: 'request', id: '1', method: 'exchange', params: {} },
    { type: 'request', method: 'exchange', params: {} },
    { type: 'response', id: 1, result: {} }, // the host's kind of message, not a worker's
    { type: 'drain', grace_ms: 0 },
  ]

  test('a worker message that is not in the registry is rejected', () => {
    for (const message of good) expect(FromWorker.safeParse(message).success, JSON.stringify(message)).toBe(true)
    for (const message of malformed) expect(FromWorker.safeParse(message).success, JSON.stringify(message)).toBe(false)
  })

  test('a host message that is not in the registry is rejected', () => {
    for (const message of [
      { type: 'response', id: 1, result: { claimed: false } },
      { type: 'response', id: 2, error: { status: 409, code: 'lease_expired', detail: 'gone' } },
      { type: 'drain', grace_ms: 1000 },
    ]) {
      expect(FromHost.safeParse(message).success, JSON.stringify(message)).toBe(true)
    }
    for (const message of [
      null,
      {},
      { type: 'response' },
      { type: 'response', id: 'x' },
      { type: 'response', id: 1, error: { status: 409 } },
      { type: 'response', id: 1, error: { status: '409', code: 'c', detail: 'd' } },
      { type: 'drain' },
      { type: 'drain', grace_ms: -1 },
      { type: 'drain', grace_ms: 0.5 },
      { type: 'kill' },
      { type: 'request', id: 1, method: 'exchange', params: {} },
    ]) {
      expect(FromHost.safeParse(message).success, JSON.stringify(message)).toBe(false)
    }
  })

  test("each method's params are checked by the worker exchange's one schema, as over HTTP", () => {
    const ref = { job_id: 'j', attempt_id: 'a', lease_token: 't' }
    const claim = { streams: ['default'], max_jobs: 1, max_wait_ms: 0 }
    const bad: [keyof typeof IPC_METHODS, unknown][] = [
      ['exchange', { worker_id: 'w', claim: { ...claim, streams: [] } }],
      ['exchange', { worker_id: 'w', claim: { ...claim, max_wait_ms: -1 } }],
      ['exchange', { worker_id: 'w', claim: { ...claim, max_jobs: 0 } }],
      ['exchange', { worker_id: '', claim }],
      ['exchange', { worker_id: 'w', heartbeat: [{ job_id: 'j', lease_token: 't', progress: 1.5 }] }],
      ['exchange', { worker_id: 'w', heartbeat: [{ job_id: 'j' }] }],
      ['exchange', { worker_id: 'w', fail: [{ ...ref, error: { code: 'x', message: 'y', retryable: 'yes' } }] }],
      ['exchange', { worker_id: 'w', claim, extra: true }],
      ['exchange', { worker_id: 'w', claim: { ...claim, thread: 256 } }],
      ['acquireFile', { file: 'relative/x', owner_id: 'o' }],
      ['acquireFile', { file: '/x' }],
      ['waitFileRetry', { file: '/x', owner_id: 'o', max_wait_ms: 1.5 }],
      ['report', { worker_id: 'w', kind: '', detail: 'd' }],
      ['report', { worker_id: 'w', kind: 'k', detail: 'd'.repeat(10_001) }],
    ]
    for (const [method, params] of bad) expect(IPC_METHODS[method].safeParse(params).success, `${method} ${JSON.stringify(params)}`).toBe(false)
    expect(IPC_METHODS.exchange.safeParse({ worker_id: 'w', heartbeat: [{ job_id: 'j', lease_token: 't', progress: 0.5, note: null }] }).success).toBe(true)
    expect(IPC_METHODS.exchange.safeParse({ worker_id: 'w', fail: [{ ...ref, error: { code: 'x', message: 'y', retryable: false } }], claim }).success).toBe(true)
  })
})

describe('the host answers a local worker (answerWorkerRequest)', () => {
  const deps = (): IpcHostDeps & { close(): void } => {
    const { engine, clock } = setup()
    const dispatch = new Dispatch(engine)
    const clockWaiters = new ClockWaiters(clock)
    return { engine, dispatch, clockWaiters, close: () => (dispatch.close(), clockWaiters.close()) }
  }
  const request = (method: IpcRequest['method'], params: unknown, id = 7): IpcRequest => ({ type: 'request', id, method, params })
  const alive = new AbortController().signal

  const claimOne = (workerId: string, max_wait_ms = 0) => ({ worker_id: workerId, claim: { streams: ['default'], max_jobs: 1, max_wait_ms } })

  test("while the host takes no writes (its database file replaced), a worker's write is answered with why, as HTTP answers it, not as a disk that failed a write", async () => {
    const d = deps()
    const { job } = d.engine.submit(aJob())
    const claimed = await answerWorkerRequest(d, { workerId: 'local-1.1', workerToken: false }, request('exchange', claimOne('local-1.1')), alive)
    const [claim] = (claimed.result as { jobs: { job_id: string; attempt_id: string; lease_token: string }[] }).jobs
    const mode: StorageMode = { state: 'read_only', reason: 'database file replaced', detail: 'The database file /d/leasehold.db was replaced while the host ran: restart the host' }
    database(d.engine).pragma('query_only = ON') // as the host refuses writes (db/file-watch.ts refuseWrites)
    const complete = request('exchange', { worker_id: 'local-1.1', complete: [{ job_id: job.id, attempt_id: claim!.attempt_id, lease_token: claim!.lease_token, result: 1 }] }, 8)
    const refused = await answerWorkerRequest({ ...d, readOnly: () => readOnlyAnswer(mode, '/d') }, { workerId: 'local-1.1', workerToken: false }, complete, alive)
    expect(refused).toEqual({ type: 'response', id: 8, error: { status: 503, code: 'storage_error', detail: `The write was not made. ${mode.detail}` } })
    // With no such state known, SQLite's refusal reads as the disk's.
    const plain = await answerWorkerRequest(d, { workerId: 'local-1.1', workerToken: false }, complete, alive)
    expect(plain).toMatchObject({ error: { code: 'storage_error', detail: expect.stringContaining('The disk failed a write') } })
    d.close()
  })

  test('a request naming another worker_id is 403 worker_mismatch, and nothing happens', async () => {
    const d = deps()
    const { job } = d.engine.submit(aJob())
    // Claim in another's name: refused, the job stays queued.
    let answer = await answerWorkerRequest(d, { workerId: 'local-1.1', workerToken: false }, request('exchange', claimOne('local-2.1')), alive)
    expect(answer).toEqual({ type: 'response', id: 7, error: { status: 403, code: 'worker_mismatch', detail: 'This process is local-1.1, not local-2.1' } })
    expect(d.engine.getJob(job.id).state).toBe('QUEUED')

    // The real claim, then reports and a problem report in another's name.
    answer = await answerWorkerRequest(d, { workerId: 'local-1.1', workerToken: false }, request('exchange', claimOne('local-1.1'), 8), alive)
    const [claim] = (answer.result as { jobs: { claimed: boolean; job_id: string; attempt_id: string; lease_token: string }[] }).jobs
    expect(claim).toMatchObject({ claimed: true, job_id: job.id })
    const ref = { job_id: job.id, attempt_id: claim!.attempt_id, lease_token: claim!.lease_token }
    const eventsBefore = d.engine.jobEvents(job.id).length
    for (const [method, params] of [
      ['exchange', { worker_id: 'local-2.1', heartbeat: [{ job_id: job.id, lease_token: claim!.lease_token }] }],
      ['exchange', { worker_id: 'local-2.1', complete: [{ ...ref, result: { stolen: true } }] }],
      ['exchange', { worker_id: 'local-2.1', fail: [{ ...ref, error: { code: 'x', message: 'y', retryable: false } }] }],
      ['report', { worker_id: 'local-2.1', kind: 'handler_load_failed', detail: 'not mine' }],
    ] as const) {
      answer = await answerWorkerRequest(d, { workerId: 'local-1.1', workerToken: false }, request(method, params, 9), alive)
      expect(answer, method).toMatchObject({ type: 'response', id: 9, error: { status: 403, code: 'worker_mismatch' } })
    }
    expect(d.engine.getJob(job.id).state).toBe('RUNNING')
    expect(d.engine.jobEvents(job.id)).toHaveLength(eventsBefore)
    expect(database(d.engine).prepare("SELECT COUNT(*) AS n FROM events WHERE event_type = 'WORKER_PROBLEM'").get()).toEqual({ n: 0 })

    // In its own name the same completion is accepted.
    answer = await answerWorkerRequest(d, { workerId: 'local-1.1', workerToken: false }, request('exchange', { worker_id: 'local-1.1', complete: [{ ...ref, result: { ok: 1 } }] }, 10), alive)
    expect(answer).toEqual({ type: 'response', id: 10, result: { heartbeats: [], completed: [{ job_id: job.id, ok: true, ack: true }], failed: [], jobs: [], claim_waited_ms: 0 } })
    expect(d.engine.getJob(job.id).state).toBe('DONE')
    d.close()
  })

  test('malformed params are 400 invalid_request naming the method; a lost lease is a refused report with its code', async () => {
    const d = deps()
    let answer = await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', { worker_id: 'w', claim: { streams: 'default' } }), alive)
    expect(answer).toMatchObject({ id: 7, error: { status: 400, code: 'invalid_request', detail: expect.stringMatching(/^exchange: /) } })
    answer = await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', null), alive)
    expect(answer).toMatchObject({ error: { status: 400, code: 'invalid_request' } })

    const { job } = d.engine.submit(aJob())
    const [claim] = ((await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', claimOne('w')), alive)).result as { jobs: Record<string, string>[] }).jobs
    expect(d.engine.expireLeasesOfWorker('w')).toBe(1)
    answer = await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', { worker_id: 'w', complete: [{ job_id: job.id, attempt_id: claim!.attempt_id, lease_token: claim!.lease_token, result: null }] }), alive)
    expect(answer.result).toMatchObject({ completed: [{ job_id: job.id, ok: false, ack: true, code: 'lease_expired' }] })
    d.close()
  })

  test('a report nested deeper than MAX_JSON_DEPTH is refused in its slot, 400 invalid_request naming the depth, as over HTTP, not a 500, and nothing happens', async () => {
    const d = deps()
    const { job } = d.engine.submit(aJob())
    const [claim] = ((await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', claimOne('w')), alive)).result as { jobs: Record<string, string>[] }).jobs
    let deep: unknown = {}
    for (let i = 0; i < 5000; i++) deep = { o: deep }
    const complete = { worker_id: 'w', complete: [{ job_id: job.id, attempt_id: claim!.attempt_id, lease_token: claim!.lease_token, result: deep }] }
    const answer = await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', complete, 8), alive)
    expect(answer).toMatchObject({ type: 'response', id: 8, result: { completed: [{ job_id: job.id, ok: false, ack: false, code: 'invalid_request', detail: `complete.0: JSON nested deeper than ${MAX_JSON_DEPTH} levels` }] } })
    expect(d.engine.getJob(job.id).state).toBe('RUNNING')
    d.close()
  })

  test('each report of an exchange is atomic on its own, as over HTTP: one that fails its schema or holds a lone surrogate is refused in its slot, the others applied', async () => {
    const d = deps()
    const jobs = [d.engine.submit(aJob()).job, d.engine.submit(aJob()).job]
    const claimTwo = { worker_id: 'w', claim: { streams: ['default'], max_jobs: 2, max_wait_ms: 0 } }
    const [a, b] = ((await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', claimTwo), alive)).result as { jobs: Record<string, string>[] }).jobs
    const ref = (c: Record<string, string>) => ({ job_id: c.job_id!, attempt_id: c.attempt_id!, lease_token: c.lease_token! })
    const complete = { worker_id: 'w', complete: [{ ...ref(a!), result: { ok: 1 } }, { ...ref(b!), result: { s: '\ud800' } }], fail: [{ ...ref(b!), error: { retryable: 'yes' } }] }
    const answer = await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', complete, 8), alive)
    expect(answer.result).toMatchObject({
      completed: [
        { job_id: a!.job_id, ok: true, ack: true },
        { job_id: b!.job_id, ok: false, ack: false, code: 'invalid_request', detail: expect.stringMatching(/^complete\.1\.result\.s: must be well-formed Unicode/) },
      ],
      failed: [{ job_id: b!.job_id, ok: false, ack: false, code: 'invalid_request', detail: expect.stringMatching(/^fail\.0\.error\.retryable: /) }],
    })
    expect(jobs.map((job) => d.engine.getJob(job.id).state)).toEqual(['DONE', 'RUNNING'])
    // What makes the exchange itself unusable refuses it whole.
    expect(await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', { worker_id: 'w', complete: {} }, 9), alive)).toMatchObject({
      error: { status: 400, code: 'invalid_request', detail: expect.stringMatching(/^exchange: complete: /) },
    })
    d.close()
  })

  test('a wait longer than the long-poll cap waits the cap, as over HTTP: a claim and a file retry wait alike', async () => {
    const d = deps()
    const asked = 3_600_000
    // Two workers each hold a job; w2 is denied w1's file, so it has a retry to wait for.
    d.engine.submit(aJob())
    d.engine.submit(aJob())
    const leaseOf = async (workerId: string) => {
      const answer = await answerWorkerRequest(d, { workerId, workerToken: false }, request('exchange', claimOne(workerId)), alive)
      return (answer.result as { jobs: { lease_id: string }[] }).jobs[0]!.lease_id
    }
    const [one, two] = [await leaseOf('w1'), await leaseOf('w2')]
    expect((await answerWorkerRequest(d, { workerId: 'w1', workerToken: false }, request('acquireFile', { file: '/data/out.txt', owner_id: 'w1', lease_id: one }), alive)).result).toEqual({ granted: true })
    expect((await answerWorkerRequest(d, { workerId: 'w2', workerToken: false }, request('acquireFile', { file: '/data/out.txt', owner_id: 'w2', lease_id: two }), alive)).result).toMatchObject({ granted: false, code: 'file_lease_held' })

    // The host runs in this process, so each wait's timer is seen as it is armed (no 30 s sleep).
    const armed = vi.spyOn(globalThis, 'setTimeout')
    try {
      for (const [workerId, method, params] of [
        ['w3', 'exchange', claimOne('w3', asked)], // no job left: the claim waits
        ['w2', 'waitFileRetry', { file: '/data/out.txt', owner_id: 'w2', max_wait_ms: asked }],
      ] as const) {
        armed.mockClear()
        const gone = new AbortController()
        const answer = answerWorkerRequest(d, { workerId, workerToken: false }, request(method, params), gone.signal)
        for (let turn = 0; turn < 200 && !armed.mock.calls.some(([, ms]) => ms === MAX_LONG_POLL_MS); turn++) await new Promise((r) => setImmediate(r))
        expect(armed.mock.calls.some(([, ms]) => ms === MAX_LONG_POLL_MS), method).toBe(true)
        expect(armed.mock.calls.some(([, ms]) => ms === asked), method).toBe(false)
        gone.abort() // the process exits: the wait ends with nothing
        expect((await answer).error, method).toBeUndefined()
      }
    } finally {
      armed.mockRestore()
    }
    d.close()
  })

  test('a waiting exchange is delivered once, from the commit that grants it: the response the promise settles with', async () => {
    const d = deps()
    const early: IpcResponse[] = []
    const pending = answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', claimOne('w', 5000)), alive, (response) => early.push(response))
    await until(() => d.dispatch.size === 1)
    const { job } = await d.engine.run(() => d.engine.submit(aJob()))
    // Delivered at the commit (dispatch.test.ts checks when), and the same as the promise's.
    expect(early).toHaveLength(1)
    expect(early[0]).toMatchObject({ type: 'response', id: 7, result: { jobs: [{ claimed: true, job_id: job.id }] } })
    expect(await pending).toEqual(early[0])
    d.close()
  })

  test('a waiting exchange whose process dies ends its wait with no job, and a later submit leases nothing to it', async () => {
    const d = deps()
    const gone = new AbortController()
    const delivered: IpcResponse[] = []
    const pending = answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', claimOne('w', 5000)), gone.signal, (response) => delivered.push(response))
    await until(() => d.dispatch.size === 1)
    gone.abort()
    await d.engine.run(() => d.engine.submit(aJob()))
    expect((await pending).result).toMatchObject({ jobs: [] })
    expect(delivered).toEqual([await pending])
    expect(d.engine.activeLeasesByWorker().size).toBe(0)
    d.close()
  })

  test('a claim made as the process dies hands no lease to it', async () => {
    const d = deps()
    d.engine.submit(aJob())
    const gone = new AbortController()
    gone.abort()
    const answer = await answerWorkerRequest(d, { workerId: 'w', workerToken: false }, request('exchange', claimOne('w', 1000)), gone.signal)
    expect(answer.result).toMatchObject({ jobs: [] })
    expect(d.engine.activeLeasesByWorker().size).toBe(0)
    d.close()
  })
})

describe('the supervisor checks what a worker process sends', () => {
  class FakeProcess implements WorkerProcess {
    readonly pid = 424242
    readonly sent: unknown[] = []
    private messageListener: (message: unknown) => void = () => {}
    private exitListener: (code: number | null) => void = () => {}
    send(message: unknown) {
      this.sent.push(message)
      if ((message as { type?: string }).type === 'drain') setImmediate(() => this.exitListener(0))
    }
    onMessage(listener: (message: unknown) => void) {
      this.messageListener = listener
    }
    onExit(listener: (code: number | null) => void) {
      this.exitListener = listener
    }
    kill() {
      this.exitListener(null)
    }
    onOutput() {}
    emit(message: unknown) {
      this.messageListener(message)
    }
  }

  let pool: WorkerPool | null = null
  afterEach(async () => {
    await pool?.stop(0)
    pool = null
  })

  /** A pool of one fake process on a fresh engine; `answered(n)` waits for the n-th message to the worker. */
  function onePool() {
    const { engine, clock } = setup()
    const lines: string[] = []
    const processes: FakeProcess[] = []
    const directory = new WorkerDirectory(() => clock.now())
    let env: Record<string, string> = {}
    const dispatch = new Dispatch(engine)
    pool = new WorkerPool({
      engine,
      dispatch,
      clockWaiters: new ClockWaiters(clock),
      directory,
      size: 1,
      spawn: (e) => {
        env = e
        const p = new FakeProcess()
        processes.push(p)
        return p
      },
      log: (line) => lines.push(line),
      workerEnv: { LEASEHOLD_WORKER_EXEC_ALLOW: '' },
    })
    pool.start()
    const worker = processes[0]!
    const answered = async (n: number) => {
      await until(() => worker.sent.length >= n, 2000, `${n} messages to the worker`)
      return worker.sent as IpcResponse[]
    }
    return { engine, clock, directory, lines, env, worker, answered, dispatch }
  }

  test('malformed messages are ignored (and logged); before "ready" only a report is answered', async () => {
    const { engine, lines, env, worker, answered } = onePool()
    expect(env.LEASEHOLD_WORKER_ID).toBe('local-1.1')

    worker.emit({ type: 'request', id: 1, method: 'steal', params: {} })
    worker.emit('hello')
    expect(lines.filter((l) => l === 'leasehold: ignored a malformed message from local-1.1')).toHaveLength(2)
    expect(worker.sent).toEqual([])

    engine.submit(aJob())
    const claimOne = { worker_id: 'local-1.1', claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 0 } }
    worker.emit({ type: 'request', id: 2, method: 'exchange', params: claimOne })
    expect((await answered(1))[0]).toEqual({ type: 'response', id: 2, error: { status: 503, code: 'worker_not_ready', detail: 'Say ready first' } })
    worker.emit({ type: 'request', id: 3, method: 'report', params: { worker_id: 'local-1.1', kind: 'handler_load_failed', detail: '/h/bad.mjs: boom' } })
    expect((await answered(2))[1]).toEqual({ type: 'response', id: 3, result: { ok: true } })
    expect(database(engine).prepare("SELECT entity_id, data FROM events WHERE event_type = 'WORKER_PROBLEM'").all()).toEqual([
      { entity_id: 'local-1.1', data: JSON.stringify({ kind: 'handler_load_failed', detail: '/h/bad.mjs: boom' }) },
    ])

    worker.emit({ type: 'ready', worker_id: 'local-1.1', types: ['sleep'] })
    worker.emit({ type: 'request', id: 4, method: 'exchange', params: claimOne })
    expect((await answered(3))[2]).toMatchObject({ type: 'response', id: 4, result: { jobs: [{ claimed: true }] } })
  })

  test('a waiting exchange is answered once, from the commit that grants it', async () => {
    const { engine, worker, answered, dispatch } = onePool()
    worker.emit({ type: 'ready', worker_id: 'local-1.1', types: ['sleep'] })
    worker.emit({ type: 'request', id: 5, method: 'exchange', params: { worker_id: 'local-1.1', claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 5000 } } })
    await until(() => dispatch.size === 1)
    expect(worker.sent).toEqual([])
    const { job } = await engine.run(() => engine.submit(aJob()))
    expect(worker.sent).toEqual([expect.objectContaining({ type: 'response', id: 5, result: expect.objectContaining({ jobs: [expect.objectContaining({ job_id: job.id })] }) })])
    // A later request's answer comes next: the waiting one was not answered twice before it.
    worker.emit({ type: 'request', id: 6, method: 'exchange', params: { worker_id: 'local-1.1', claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 0 } } })
    expect((await answered(2)).map((m) => m.id)).toEqual([5, 6])
  })

  /** Links a stand-in for a worker's driving thread: a socket that shows its worker's token, and keeps the lines the host writes. */
  async function aLinkedThread(env: Record<string, string>, workerId: string) {
    const thread = connect(env[LINK_PATH_ENV]!)
    const lines: string[] = []
    const read = lineReader((line) => lines.push(line))
    thread.setEncoding('utf8').on('data', (chunk: string) => read.push(chunk))
    await new Promise((resolve) => thread.once('connect', resolve))
    thread.write(`${JSON.stringify({ worker_id: workerId, thread: 0, token: env[LINK_TOKEN_ENV] })}\n`)
    const request = (id: number, method: string, params: unknown) => thread.write(`${JSON.stringify({ type: 'request', id, method, params })}\n`)
    const answers = async (n: number) => {
      await until(() => lines.length >= n, 2000, `${n} answers on the link`)
      return lines.map((line) => JSON.parse(line) as IpcResponse)
    }
    return { thread, request, answers }
  }

  test('a request a linked thread sends is answered over its link as over IPC: a waiting claim from the commit that grants it; one that overtook "ready" waits for it', async () => {
    const { engine, env, worker, dispatch } = onePool()
    const me = 'local-1.1'
    const { thread, request, answers } = await aLinkedThread(env, me)
    try {
      const claim = (id: number) => request(id, 'exchange', { worker_id: me, claim: { streams: ['default'], max_jobs: 4, max_wait_ms: 5000 } })
      // The link is a socket of its own: its first claim may come before the ready message the
      // worker sent first over the process channel. It is neither refused nor served before it.
      claim(1)
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(dispatch.size).toBe(0)
      worker.emit({ type: 'ready', worker_id: me, types: ['sleep'] })
      await until(() => dispatch.size === 1, 2000, 'the held claim waiting')
      const { job } = await engine.run(() => engine.submit(aJob()))
      expect((await answers(1))[0]).toMatchObject({ type: 'response', id: 1, result: { jobs: [{ job_id: job.id }] } })
      // The same checks as over IPC: a worker cannot act in another's name.
      request(3, 'exchange', { worker_id: 'local-2.1' })
      expect((await answers(2))[1]).toMatchObject({ id: 3, error: { status: 403, code: 'worker_mismatch' } })
      expect(worker.sent).toEqual([]) // nothing of it went over IPC
    } finally {
      thread.destroy()
    }
  })

  test('a report a linked thread sends nested deeper than MAX_JSON_DEPTH is refused in its slot, 400 naming the depth, over its link, not 500', async () => {
    const { env, worker } = onePool()
    const me = 'local-1.1'
    const { thread, answers } = await aLinkedThread(env, me)
    try {
      worker.emit({ type: 'ready', worker_id: me, types: ['noop'] })
      const deep = '{"o":'.repeat(5000) + '{}' + '}'.repeat(5000)
      thread.write(`{"type":"request","id":4,"method":"exchange","params":{"worker_id":"${me}","complete":[{"job_id":"j","attempt_id":"a","lease_token":"t","result":${deep}}]}}\n`)
      expect((await answers(1))[0]).toMatchObject({ type: 'response', id: 4, result: { completed: [{ job_id: 'j', ok: false, code: 'invalid_request', detail: `complete.0: JSON nested deeper than ${MAX_JSON_DEPTH} levels` }] } })
    } finally {
      thread.destroy()
    }
  })

  test('a claim waiting on a link that closes ends, and a later submit leases nothing to it', async () => {
    const { engine, env, worker } = onePool()
    const me = 'local-1.1'
    worker.emit({ type: 'ready', worker_id: me, types: ['sleep'] })
    const { thread, request } = await aLinkedThread(env, me)
    request(1, 'exchange', { worker_id: me, claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 5000 } })
    await until(() => pool!.linkRequests === 1, 2000, 'the claim read')
    thread.destroy()
    await new Promise((resolve) => setTimeout(resolve, 50))
    const { job } = await engine.run(() => engine.submit(aJob()))
    expect(engine.getJob(job.id).state).toBe('QUEUED')
  })

  test('a local worker on a long job is busy with that job, and its heartbeats keep it last seen now', async () => {
    const { engine, clock, directory, worker, answered } = onePool()
    const me = 'local-1.1'
    const view = () => directory.list(engine).find((w) => w.worker_id === me)!
    worker.emit({ type: 'ready', worker_id: me, types: ['sleep'] })
    expect(view()).toMatchObject({ state: 'ready', current_job_ids: [], last_seen_at: T0 })

    const { job } = engine.submit(aJob())
    clock.advance(5 * SECOND)
    worker.emit({ type: 'request', id: 1, method: 'exchange', params: { worker_id: me, claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 0 } } })
    const [claim] = ((await answered(1))[0]!.result as { jobs: { job_id: string; attempt_id: string; lease_token: string }[] }).jobs
    expect(claim!.job_id).toBe(job.id)
    expect(view()).toMatchObject({ state: 'busy', current_job_ids: [job.id], last_seen_at: T0 + 5 * SECOND })

    // Three minutes of a job that sends nothing but heartbeats (every 10 s, the default TTL's third).
    const ref = { job_id: claim!.job_id, attempt_id: claim!.attempt_id, lease_token: claim!.lease_token }
    for (let beat = 1; beat <= 18; beat++) {
      clock.advance(10 * SECOND)
      worker.emit({ type: 'request', id: 1 + beat, method: 'exchange', params: { worker_id: me, heartbeat: [{ job_id: ref.job_id, lease_token: ref.lease_token }] } })
      expect(view()).toMatchObject({ state: 'busy', current_job_ids: [job.id], last_seen_at: clock.now() })
    }
    expect((await answered(19))[18]).toMatchObject({ id: 19, result: { heartbeats: [{ ok: true, cancel_requested: false }] } })

    clock.advance(SECOND)
    worker.emit({ type: 'request', id: 20, method: 'exchange', params: { worker_id: me, complete: [{ ...ref, result: null }] } })
    await answered(20)
    expect(view()).toMatchObject({ state: 'ready', current_job_ids: [], last_seen_at: clock.now() })
  })
})

describe('the worker end (IpcTransport)', () => {
  function channel() {
    const sent: IpcRequest[] = []
    let listener: (message: unknown) => void = () => {}
    const ch: IpcChannel = { send: (m) => sent.push(m as IpcRequest), onMessage: (l) => (listener = l) }
    return { ch, sent, deliver: (m: unknown) => listener(m) }
  }
  const ref = { worker_id: 'w', job_id: 'j', attempt_id: 'a', lease_token: 't' }

  test('answers are matched by id; a 409 is a lost lease, another error a HostError; malformed answers are ignored', async () => {
    const { ch, sent, deliver } = channel()
    const commands: unknown[] = []
    const transport = new IpcTransport(ch, (c) => commands.push(c))
    const exchanged = transport.exchange({ worker_id: 'w', complete: [{ ...ref, result: 1 }] })
    const held = transport.heartbeatFile({ file: '/f', owner_id: 'o' })
    const report = transport.report({ worker_id: 'w', kind: 'k', detail: 'd' })
    expect(sent.map((m) => [m.type, m.id, m.method])).toEqual([
      ['request', 1, 'exchange'],
      ['request', 2, 'heartbeatFile'],
      ['request', 3, 'report'],
    ])
    const answer = { heartbeats: [], completed: [{ job_id: 'j', ok: true, ack: true }], failed: [], jobs: [], claim_waited_ms: 0 }
    deliver({ type: 'response', id: 2, error: { status: 409, code: 'file_lease_lost', detail: 'taken' } })
    deliver({ type: 'response', id: 1, error: { status: 409 } }) // malformed: ignored
    deliver({ type: 'response', id: '1', result: answer }) // malformed: ignored
    deliver({ type: 'drain', grace_ms: 5 })
    deliver({ type: 'drain', grace_ms: -5 }) // malformed: ignored
    deliver({ type: 'response', id: 3, error: { status: 403, code: 'worker_mismatch', detail: 'no' } })
    deliver({ type: 'response', id: 1, result: answer })
    await expect(exchanged).resolves.toEqual(answer)
    await expect(held).rejects.toBeInstanceOf(LeaseLostError)
    await expect(held).rejects.toMatchObject({ code: 'file_lease_lost' })
    await expect(report).rejects.toBeInstanceOf(HostError)
    await expect(report).rejects.toMatchObject({ status: 403, code: 'worker_mismatch' })
    expect(commands).toEqual([{ type: 'drain', grace_ms: 5 }])
    transport.close()
    await expect(transport.exchange({ worker_id: 'w' })).rejects.toThrow('transport closed')
  })

  test('a waiting exchange removes its abort listener when it ends: 20,000 claims leave the long-lived signal as they found it', async () => {
    const { ch, sent, deliver } = channel()
    const transport = new IpcTransport(ch)
    const stop = new AbortController()
    const empty = { heartbeats: [], completed: [], failed: [], jobs: [], claim_waited_ms: 0 }
    const listeners = () => getEventListeners(stop.signal, 'abort').length
    const before = listeners()
    for (let i = 0; i < 20_000; i++) {
      const pending = transport.exchange({ worker_id: 'w', claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 1000 } }, stop.signal)
      deliver({ type: 'response', id: sent[sent.length - 1]!.id, result: empty })
      await pending
    }
    expect(listeners()).toBe(before)
    // One waiting exchange holds one listener, and an abort still ends it (the host's answer is not awaited).
    const waiting = transport.exchange({ worker_id: 'w', claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 1000 } }, stop.signal)
    expect(listeners()).toBe(before + 1)
    stop.abort() // stopping: the wait ends at once, with no jobs
    await expect(waiting).resolves.toEqual(empty)
    expect(listeners()).toBe(before)
  })

  test("a job stopped while it waits at the file gate leaves the gate at once: its wait for the file's retry ends not ready, the host's late answer dropped", async () => {
    const { ch, sent, deliver } = channel()
    const transport = new IpcTransport(ch)
    const stop = new AbortController()
    const waiting = transport.waitFileRetry({ file: '/data/out.txt', owner_id: 'o', max_wait_ms: 30_000 }, stop.signal)
    expect(sent.map((m) => m.method)).toEqual(['waitFileRetry'])
    stop.abort() // canceled, past its max_runtime, or its lease lost: the host answers only when the retry is due
    await expect(waiting).resolves.toBe(false)
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0)
    deliver({ type: 'response', id: sent[0]!.id, result: true }) // late: no one waits for it
    await expect(transport.waitFileRetry({ file: '/data/out.txt', owner_id: 'o', max_wait_ms: 1 }, stop.signal)).resolves.toBe(false)
  })
})

describe('heartbeat jitter', () => {
  test('stays within ±10 % of the interval', () => {
    expect(jitter(1000, () => 0)).toBe(900)
    expect(jitter(1000, () => 0.5)).toBe(1000)
    expect(jitter(1000, () => 0.999999)).toBe(1100)
    let low = 0
    let high = 0
    for (const interval of [1000, 3000, 10_000, 100_000]) {
      for (let i = 0; i < 5000; i++) {
        const value = jitter(interval)
        expect(value).toBeGreaterThanOrEqual(interval * 0.9)
        expect(value).toBeLessThanOrEqual(interval * 1.1)
        if (value < interval) low++
        else if (value > interval) high++
      }
    }
    // It actually spreads: both sides of the interval occur.
    expect(low).toBeGreaterThan(1000)
    expect(high).toBeGreaterThan(1000)
  })
})
