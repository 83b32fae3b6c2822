/**
 * The IPC message registry between the host and its local workers (src-worker/ipc-protocol.ts),
 * both ends of it without processes: the host's answers (answerWorkerRequest) and supervisor,
 * and the worker's IpcTransport. Plus the heartbeat jitter.
 */
import { getEventListeners } from 'node:events'
import { afterEach, describe, expect, test } from 'vitest'
import { ClaimWaiters } from '../../src-main/claim-waiters'
import { ClockWaiters } from '../../src-main/clock-waiters'
import { SECOND } from '../../src-main/engine/clock'
import { answerWorkerRequest, type IpcHostDeps } from '../../src-main/pool/ipc-host'
import type { WorkerProcess } from '../../src-main/pool/spawn'
import { WorkerPool } from '../../src-main/pool/supervisor'
import { WorkerDirectory } from '../../src-main/workers'
import { FromHost, FromWorker, IPC_METHODS, type IpcRequest, type IpcResponse } from '../../src-worker/ipc-protocol'
import { jitter } from '../../src-worker/runtime'
import { LeaseLostError } from '../../src-worker/transport'
import { HostError } from '../../src-worker/transport-http'
import { type IpcChannel, IpcTransport } from '../../src-worker/transport-ipc'
import { aJob, setup, T0 } from '../helpers/engine'

describe('the message registry', () => {
  const good: unknown[] = [
    { type: 'ready', worker_id: 'local-1.1', types: ['sleep', 'exec'] },
    { type: 'job', job_id: null },
    { type: 'job', job_id: 'j1' },
    { type: 'request', id: 1, method: 'claim', params: { worker_id: 'w', streams: ['default'], max_wait_ms: 0 } },
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
    { type: 'job' },
    { type: 'job', job_id: 7 },
    { type: 'request', id: 1, method: 'steal', params: {} },
    { type: 'request', id: 1.5, method: 'claim', params: {} },
    { type: 'request', id: '1', method: 'claim', params: {} },
    { type: 'request', method: 'claim', params: {} },
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
      { type: 'request', id: 1, method: 'claim', params: {} },
    ]) {
      expect(FromHost.safeParse(message).success, JSON.stringify(message)).toBe(false)
    }
  })

  test("each method's params are checked", () => {
    const ref = { worker_id: 'w', job_id: 'j', attempt_id: 'a', lease_token: 't' }
    const bad: [keyof typeof IPC_METHODS, unknown][] = [
      ['claim', { worker_id: 'w', streams: [], max_wait_ms: 0 }],
      ['claim', { worker_id: 'w', streams: ['default'], max_wait_ms: -1 }],
      ['claim', { worker_id: '', streams: ['default'], max_wait_ms: 0 }],
      ['heartbeat', { ...ref, progress: 1.5 }],
      ['heartbeat', { worker_id: 'w', job_id: 'j', attempt_id: 'a' }],
      ['fail', { ...ref, error: { code: 'x', message: 'y' } }],
      ['acquireFile', { file: '/x', owner_id: 'o' }],
      ['waitFileRetry', { file: '/x', owner_id: 'o', max_wait_ms: 1.5 }],
      ['report', { worker_id: 'w', kind: '', detail: 'd' }],
      ['report', { worker_id: 'w', kind: 'k', detail: 'd'.repeat(10_001) }],
    ]
    for (const [method, params] of bad) expect(IPC_METHODS[method].safeParse(params).success, `${method} ${JSON.stringify(params)}`).toBe(false)
    expect(IPC_METHODS.heartbeat.safeParse({ ...ref, progress: 0.5, note: null }).success).toBe(true)
    expect(IPC_METHODS.fail.safeParse({ ...ref, error: { code: 'x', message: 'y', retryable: false } }).success).toBe(true)
  })
})

describe('the host answers a local worker (answerWorkerRequest)', () => {
  const deps = (): IpcHostDeps & { close(): void } => {
    const { engine, clock } = setup()
    const waiters = new ClaimWaiters(engine)
    const clockWaiters = new ClockWaiters(clock)
    return { engine, waiters, clockWaiters, close: () => (waiters.close(), clockWaiters.close()) }
  }
  const request = (method: IpcRequest['method'], params: unknown, id = 7): IpcRequest => ({ type: 'request', id, method, params })
  const alive = new AbortController().signal

  test('a request naming another worker_id is 403 worker_mismatch, and nothing happens', async () => {
    const d = deps()
    const { job } = d.engine.submit(aJob())
    // Claim in another's name: refused, the job stays queued.
    let answer = await answerWorkerRequest(d, 'local-1.1', request('claim', { worker_id: 'local-2.1', streams: ['default'], max_wait_ms: 0 }), alive)
    expect(answer).toEqual({ type: 'response', id: 7, error: { status: 403, code: 'worker_mismatch', detail: 'This process is local-1.1, not local-2.1' } })
    expect(d.engine.getJob(job.id).state).toBe('QUEUED')

    // The real claim, then a heartbeat, a completion and a report in another's name.
    answer = await answerWorkerRequest(d, 'local-1.1', request('claim', { worker_id: 'local-1.1', streams: ['default'], max_wait_ms: 0 }, 8), alive)
    const claim = answer.result as { claimed: boolean; job_id: string; attempt_id: string; lease_token: string }
    expect(claim).toMatchObject({ claimed: true, job_id: job.id })
    const ref = { worker_id: 'local-2.1', job_id: job.id, attempt_id: claim.attempt_id, lease_token: claim.lease_token }
    const eventsBefore = d.engine.jobEvents(job.id).length
    for (const [method, params] of [
      ['heartbeat', ref],
      ['complete', { ...ref, result: { stolen: true } }],
      ['fail', { ...ref, error: { code: 'x', message: 'y', retryable: false } }],
      ['report', { worker_id: 'local-2.1', kind: 'handler_load_failed', detail: 'not mine' }],
    ] as const) {
      answer = await answerWorkerRequest(d, 'local-1.1', request(method, params, 9), alive)
      expect(answer, method).toMatchObject({ type: 'response', id: 9, error: { status: 403, code: 'worker_mismatch' } })
    }
    expect(d.engine.getJob(job.id).state).toBe('RUNNING')
    expect(d.engine.jobEvents(job.id)).toHaveLength(eventsBefore)
    expect(d.engine.ctx.db.prepare("SELECT COUNT(*) AS n FROM events WHERE event_type = 'WORKER_PROBLEM'").get()).toEqual({ n: 0 })

    // In its own name the same completion is accepted.
    answer = await answerWorkerRequest(d, 'local-1.1', request('complete', { ...ref, worker_id: 'local-1.1', result: { ok: 1 } }, 10), alive)
    expect(answer).toEqual({ type: 'response', id: 10, result: { ok: true } })
    expect(d.engine.getJob(job.id).state).toBe('DONE')
    d.close()
  })

  test('malformed params are 400 invalid_request naming the method; a lost lease is 409', async () => {
    const d = deps()
    let answer = await answerWorkerRequest(d, 'w', request('claim', { worker_id: 'w', streams: 'default' }), alive)
    expect(answer).toMatchObject({ id: 7, error: { status: 400, code: 'invalid_request', detail: expect.stringMatching(/^claim: /) } })
    answer = await answerWorkerRequest(d, 'w', request('heartbeat', null), alive)
    expect(answer).toMatchObject({ error: { status: 400, code: 'invalid_request' } })

    const { job } = d.engine.submit(aJob())
    const claim = (await answerWorkerRequest(d, 'w', request('claim', { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }), alive)).result as Record<string, string>
    expect(d.engine.expireLeasesOfWorker('w')).toBe(1)
    answer = await answerWorkerRequest(d, 'w', request('complete', { worker_id: 'w', job_id: job.id, attempt_id: claim.attempt_id, lease_token: claim.lease_token, result: null }), alive)
    expect(answer).toMatchObject({ error: { status: 409, code: 'lease_expired' } })
    d.close()
  })

  test('a claim made as the process dies hands no lease to it', async () => {
    const d = deps()
    d.engine.submit(aJob())
    const gone = new AbortController()
    gone.abort()
    const answer = await answerWorkerRequest(d, 'w', request('claim', { worker_id: 'w', streams: ['default'], max_wait_ms: 1000 }), gone.signal)
    expect(answer.result).toEqual({ claimed: false })
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
    pool = new WorkerPool({
      engine,
      waiters: new ClaimWaiters(engine),
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
      for (let i = 0; i < 50 && worker.sent.length < n; i++) await new Promise((r) => setTimeout(r, 5))
      return worker.sent as IpcResponse[]
    }
    return { engine, clock, directory, lines, env, worker, answered }
  }

  test('malformed messages are ignored (and logged); before "ready" only a report is answered', async () => {
    const { engine, lines, env, worker, answered } = onePool()
    expect(env.LEASEHOLD_WORKER_ID).toBe('local-1.1')

    worker.emit({ type: 'request', id: 1, method: 'steal', params: {} })
    worker.emit('hello')
    expect(lines.filter((l) => l === 'leasehold: ignored a malformed message from local-1.1')).toHaveLength(2)
    expect(worker.sent).toEqual([])

    engine.submit(aJob())
    worker.emit({ type: 'request', id: 2, method: 'claim', params: { worker_id: 'local-1.1', streams: ['default'], max_wait_ms: 0 } })
    expect((await answered(1))[0]).toEqual({ type: 'response', id: 2, error: { status: 503, code: 'worker_not_ready', detail: 'Say ready first' } })
    worker.emit({ type: 'request', id: 3, method: 'report', params: { worker_id: 'local-1.1', kind: 'handler_load_failed', detail: '/h/bad.mjs: boom' } })
    expect((await answered(2))[1]).toEqual({ type: 'response', id: 3, result: { ok: true } })
    expect(engine.ctx.db.prepare("SELECT entity_id, data FROM events WHERE event_type = 'WORKER_PROBLEM'").all()).toEqual([
      { entity_id: 'local-1.1', data: JSON.stringify({ kind: 'handler_load_failed', detail: '/h/bad.mjs: boom' }) },
    ])

    worker.emit({ type: 'ready', worker_id: 'local-1.1', types: ['sleep'] })
    worker.emit({ type: 'request', id: 4, method: 'claim', params: { worker_id: 'local-1.1', streams: ['default'], max_wait_ms: 0 } })
    expect((await answered(3))[2]).toMatchObject({ type: 'response', id: 4, result: { claimed: true } })
  })

  test('a local worker on a long job is busy with that job, and its heartbeats keep it last seen now', async () => {
    const { engine, clock, directory, worker, answered } = onePool()
    const me = 'local-1.1'
    const view = () => directory.list(engine).find((w) => w.worker_id === me)!
    worker.emit({ type: 'ready', worker_id: me, types: ['sleep'] })
    expect(view()).toMatchObject({ state: 'ready', current_job_ids: [], last_seen_at: T0 })

    const { job } = engine.submit(aJob())
    clock.advance(5 * SECOND)
    worker.emit({ type: 'request', id: 1, method: 'claim', params: { worker_id: me, streams: ['default'], max_wait_ms: 0 } })
    const claim = (await answered(1))[0]!.result as { job_id: string; attempt_id: string; lease_token: string }
    expect(claim.job_id).toBe(job.id)
    worker.emit({ type: 'job', job_id: job.id })
    expect(view()).toMatchObject({ state: 'busy', current_job_ids: [job.id], last_seen_at: T0 + 5 * SECOND })

    // Three minutes of a job that sends nothing but heartbeats (every 10 s, the default TTL's third).
    const ref = { worker_id: me, job_id: claim.job_id, attempt_id: claim.attempt_id, lease_token: claim.lease_token }
    for (let beat = 1; beat <= 18; beat++) {
      clock.advance(10 * SECOND)
      worker.emit({ type: 'request', id: 1 + beat, method: 'heartbeat', params: ref })
      expect(view()).toMatchObject({ state: 'busy', current_job_ids: [job.id], last_seen_at: clock.now() })
    }
    expect((await answered(19))[18]).toMatchObject({ id: 19, result: { cancel_requested: false } })

    clock.advance(SECOND)
    worker.emit({ type: 'request', id: 20, method: 'complete', params: { ...ref, result: null } })
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
    const beat = transport.heartbeat(ref)
    const done = transport.complete({ ...ref, result: 1 })
    const report = transport.report({ worker_id: 'w', kind: 'k', detail: 'd' })
    expect(sent.map((m) => [m.type, m.id, m.method])).toEqual([
      ['request', 1, 'heartbeat'],
      ['request', 2, 'complete'],
      ['request', 3, 'report'],
    ])
    deliver({ type: 'response', id: 2, error: { status: 409, code: 'lease_expired', detail: 'Lease x expired' } })
    deliver({ type: 'response', id: 1, error: { status: 409 } }) // malformed: ignored
    deliver({ type: 'response', id: '1', result: { cancel_requested: true } }) // malformed: ignored
    deliver({ type: 'drain', grace_ms: 5 })
    deliver({ type: 'drain', grace_ms: -5 }) // malformed: ignored
    deliver({ type: 'response', id: 3, error: { status: 403, code: 'worker_mismatch', detail: 'no' } })
    deliver({ type: 'response', id: 1, result: { cancel_requested: true } })
    await expect(beat).resolves.toEqual({ cancel_requested: true })
    await expect(done).rejects.toBeInstanceOf(LeaseLostError)
    await expect(done).rejects.toMatchObject({ code: 'lease_expired' })
    await expect(report).rejects.toBeInstanceOf(HostError)
    await expect(report).rejects.toMatchObject({ status: 403, code: 'worker_mismatch' })
    expect(commands).toEqual([{ type: 'drain', grace_ms: 5 }])
    transport.close()
    await expect(transport.heartbeat(ref)).rejects.toThrow('transport closed')
  })
})

describe('the worker end over a long life (IpcTransport.claim)', () => {
  test('a claim removes its abort listener when it ends: 20,000 claims leave the long-lived signal as they found it', async () => {
    // A fake parent port in this process: it answers every claim at once, "nothing to claim"
    // except every 1000th, which gets a job.
    let listener: (message: unknown) => void = () => {}
    const port: IpcChannel = {
      send: (m) => {
        const { id } = m as IpcRequest
        const result = id % 1000 === 0 ? { claimed: true, job_id: `j${id}` } : { claimed: false }
        queueMicrotask(() => listener({ type: 'response', id, result }))
      },
      onMessage: (l) => (listener = l),
    }
    const transport = new IpcTransport(port)
    const stop = new AbortController()
    const request = { worker_id: 'w', streams: ['default'], max_wait_ms: 20_000 }
    const before = getEventListeners(stop.signal, 'abort').length
    let claimed = 0
    for (let i = 0; i < 20_000; i++) {
      if (await transport.claim(request, stop.signal)) claimed++
    }
    expect(claimed).toBe(20)
    expect(getEventListeners(stop.signal, 'abort').length).toBe(before)

    // One waiting claim holds one listener, and an abort still ends it (the host's answer is not awaited).
    const silent = new IpcTransport({ send: () => {}, onMessage: () => {} })
    const waiting = silent.claim(request, stop.signal)
    expect(getEventListeners(stop.signal, 'abort').length).toBe(before + 1)
    stop.abort()
    await expect(waiting).resolves.toBeNull()
    expect(getEventListeners(stop.signal, 'abort').length).toBe(before)
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
