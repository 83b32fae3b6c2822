import { safeParseFast } from '../../src-shared/fast-parse'
import { DRAIN_KILL_AFTER_MS } from '../../src-shared/limits'
import { nextRestart } from '../../src-shared/restart-backoff'
import { FromWorker, type IpcResponse } from '../../src-shared/ipc-protocol'
import { endGroups, type ProcessGroup } from '../../src-shared/process-groups'
import type { WorkerDirectory } from '../worker-roster/directory'
import { answerWorkerRequest, type IpcHostDeps } from './ipc-host'
import type { Spawner, WorkerProcess } from './spawn'
import { ThreadLinks } from './thread-links'
import { localWorkerId } from '../../src-shared/local-worker-id'

export interface PoolOptions extends IpcHostDeps {
  size: number
  spawn: Spawner
  directory: WorkerDirectory
  log: (line: string) => void
  /** Environment every worker gets (streams, handlers folder, exec allow-list). */
  workerEnv: Record<string, string>
  /** A worker that has not said it is ready by then is killed. */
  readyTimeoutMs?: number
  /** Restart delay after the n-th consecutive failure: min(1 s × 2^n, this). */
  maxRestartDelayMs?: number
}

/** A worker that stayed up this long is healthy again: its next restart starts the backoff over. */
const HEALTHY_AFTER_MS = 60_000


interface Slot {
  index: number
  generation: number
  failures: number
  worker: WorkerProcess | null
  workerId: string | null
  restartTimer: NodeJS.Timeout | null
}

/**
 * The embedded worker pool's supervisor: keeps `size` local worker processes running, answers
 * their IPC requests with the engine, and restarts a crashed one with backoff. A worker that
 * fails to start is killed and never handed work; when one exits, its leases expire at once, so
 * its jobs are requeued now rather than after their TTL.
 */
export class WorkerPool {
  private readonly slots: Slot[]
  private stopping = false
  private readonly exits = new Map<string, Promise<void>>()
  /** The ending of the exec programs that exited workers left running (see {@link launch}), awaited by {@link stop}. */
  private readonly endings = new Set<Promise<void>>()
  /** The workers' links: how a worker's driving thread claims and reports with no hop through its main thread (src-shared/thread-link.ts). */
  private links: ThreadLinks | null = null
  /** How to answer a request of each worker that is up, over IPC or its link (see {@link launch}). */
  private readonly answerers = new Map<string, (message: FromWorker, gone: AbortSignal | null, reply: (response: IpcResponse) => void) => void>()

  constructor(private readonly options: PoolOptions) {
    this.slots = Array.from({ length: options.size }, (_, index) => ({ index, generation: 0, failures: 0, worker: null, workerId: null, restartTimer: null }))
  }

  start(): void {
    this.links = new ThreadLinks(this.options.log, (workerId, raw, linkGone, reply) => {
      const parsed = safeParseFast(FromWorker, raw)
      if (!parsed.success || parsed.data.type !== 'request') return this.options.log(`leasehold: ignored a malformed link message from ${workerId}`)
      this.answerers.get(workerId)?.(parsed.data, linkGone, reply)
    })
    for (const slot of this.slots) this.launch(slot)
  }

  /** Requests the workers' driving threads sent over their links so far (see src-shared/thread-link.ts). */
  get linkRequests(): number {
    return this.links?.requests ?? 0
  }

  private launch(slot: Slot): void {
    const { directory, log } = this.options
    slot.generation += 1
    const workerId = localWorkerId(slot.index, slot.generation)
    try {
      // Remembered before it can hold a lease: should the host die, the next start expires its leases at once.
      this.options.engine.recordLocalWorker(workerId)
    } catch (error) {
      // A full disk, say: after a crash its leases then wait out their TTL, as any worker's.
      log(`leasehold: could not record local worker ${workerId} (${(error as Error).message}); after a crash its leases expire on their TTL`)
    }
    const worker = this.options.spawn({ ...this.options.workerEnv, LEASEHOLD_WORKER_ID: workerId, ...this.links?.envFor(workerId) })
    slot.worker = worker
    slot.workerId = workerId
    const startedAt = Date.now()
    const gone = new AbortController()
    let ready = false
    /**
     * The process groups of its exec programs that it said are running (src-worker/exec-groups.ts).
     * A worker that dies cannot end them: when it exits, whatever it left running is ended here.
     */
    const execGroups = new Map<number, ProcessGroup>()
    /** Requests from the worker's links that came before its ready message: answered once it comes. */
    const beforeReady: (() => void)[] = []
    directory.update(workerId, { kind: 'local', pid: worker.pid, state: 'starting', started_at: startedAt, restarts: slot.generation - 1 })
    worker.onOutput((line) => log(`[${workerId}] ${line}`))

    const readyTimer = setTimeout(() => {
      log(`leasehold: local worker ${workerId} did not start within ${this.options.readyTimeoutMs ?? 20_000} ms; killing it`)
      worker.kill()
    }, this.options.readyTimeoutMs ?? 20_000)

    // Every message is a sign of life, heartbeats above all: a worker on a long job says little
    // else. A request is answered over the way it came (`gone`: a link that closes, besides the process).
    const handle = (message: FromWorker, linkGone: AbortSignal | null, reply: (response: IpcResponse) => void) => {
      directory.touch(workerId)
      if (message.type === 'ready') {
        ready = true
        clearTimeout(readyTimer)
        // A utility process has its pid only once it has spawned: by now it has.
        directory.update(workerId, { state: 'ready', pid: worker.pid })
        for (const answerNow of beforeReady.splice(0)) answerNow()
      } else if (message.type === 'exec_started') {
        execGroups.set(message.pgid, { pgid: message.pgid, started: message.started })
      } else if (message.type === 'exec_ended') {
        execGroups.delete(message.pgid)
      } else if (!ready && linkGone !== null && message.method !== 'report') {
        // A link is a socket of its own, and its first claim may overtake the ready message the
        // worker sent before it over the process channel: it waits for that message. (A worker
        // that never says ready is killed by the timer above, and its link closes.)
        beforeReady.push(() => handle(message, linkGone, reply))
      } else if (!ready && message.method !== 'report') {
        // Not started properly: no work for it, whatever it asks. (It may report what went
        // wrong while starting, e.g. a handler module that failed to load, before it is ready.)
        reply({ type: 'response', id: message.id, error: { status: 503, code: 'worker_not_ready', detail: 'Say ready first' } })
      } else {
        // Each answer is delivered once, when dispatch says (a waiting claim's from the commit that grants it).
        // A link closes when its worker exits (links.forget below), if not before.
        void answerWorkerRequest(this.options, { workerId, workerToken: false }, message, linkGone ?? gone.signal, reply)
      }
    }
    this.answerers.set(workerId, handle)
    worker.onMessage((raw) => {
      const parsed = safeParseFast(FromWorker, raw)
      if (!parsed.success) return log(`leasehold: ignored a malformed message from ${workerId}`)
      handle(parsed.data, null, (response) => worker.send(response))
    })

    let exited: () => void = () => {}
    this.exits.set(workerId, new Promise<void>((resolve) => (exited = resolve)))
    // A spawn that failed (out of descriptors, say) ends here too: the slot is restarted like any other.
    worker.onExit((code, failedToStart) => {
      clearTimeout(readyTimer)
      gone.abort()
      if (execGroups.size > 0) {
        // Before its jobs are requeued below: their next attempts must not run beside these.
        log(`leasehold: local worker ${workerId} left ${execGroups.size} exec program(s) running; ending them`)
        const ending = endGroups(execGroups.values())
        this.endings.add(ending)
        void ending.then(() => this.endings.delete(ending))
      }
      let expired = 0
      try {
        expired = this.options.engine.expireLeasesOfWorker(workerId)
      } catch (error) {
        // A full disk, say: the reaper expires them on its next tick that can write.
        log(`leasehold: the leases of ${workerId} could not be expired now (${(error as Error).message}); the reaper expires them once the host takes writes again`)
      }
      directory.forget(workerId)
      this.answerers.delete(workerId)
      this.links?.forget(workerId)
      this.exits.delete(workerId)
      exited()
      if (this.stopping) return
      const restart = nextRestart(slot.failures, ready && Date.now() - startedAt > HEALTHY_AFTER_MS, this.options.maxRestartDelayMs ?? 30_000)
      slot.failures = restart.failures
      const delay = restart.delayMs
      const how = failedToStart ? `could not start (${failedToStart.message})` : `exited (${code ?? 'signal'})`
      log(`leasehold: local worker ${workerId} ${how}${expired ? `; ${expired} lease(s) expired` : ''}; restarting in ${delay} ms`)
      slot.restartTimer = setTimeout(() => {
        slot.restartTimer = null
        if (!this.stopping) this.launch(slot)
      }, delay)
    })
  }

  /**
   * Drains: each worker stops claiming, running jobs get `graceMs` to finish, then are failed as
   * retryable; a worker still alive a few seconds after that is killed.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true
    for (const slot of this.slots) {
      if (slot.restartTimer) clearTimeout(slot.restartTimer)
      if (slot.workerId) this.options.directory.update(slot.workerId, { state: 'draining' })
      slot.worker?.send({ type: 'drain', grace_ms: graceMs })
    }
    const all = Promise.all(this.exits.values())
    const deadline = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), graceMs + DRAIN_KILL_AFTER_MS).unref())
    if ((await Promise.race([all, deadline])) === 'late') {
      for (const slot of this.slots) slot.worker?.kill()
      await all
    }
    await Promise.all(this.endings)
    this.links?.close()
  }

  /** The pids of the running local workers (for tests and `leasehold status`). */
  pids(): number[] {
    return this.slots.flatMap((s) => (s.worker?.pid ? [s.worker.pid] : []))
  }
}
