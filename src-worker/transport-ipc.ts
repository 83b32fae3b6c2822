import { safeParseFast } from '../src-shared/fast-parse'
import { FromHost, type IpcMethod, type IpcParams } from '../src-shared/ipc-protocol'
import { type ExchangeAnswer, type FileAcquireAnswer, HostError, LeaseLostError, noAnswer, unsentOf, type WorkerTransport } from './transport'

/** A message pipe to the host: Node's child-process IPC, or Electron's utility-process port. */
export interface IpcChannel {
  send(message: unknown): void
  onMessage(listener: (message: unknown) => void): void
}

/** The channel of this process, whichever way the host started it. */
export function processChannel(): IpcChannel {
  const parentPort = (process as unknown as { parentPort?: { postMessage(m: unknown): void; on(e: 'message', l: (e: { data: unknown }) => void): void } }).parentPort
  if (parentPort) {
    return { send: (m) => parentPort.postMessage(m), onMessage: (l) => parentPort.on('message', (e) => l(e.data)) }
  }
  if (!process.send) throw new Error('this worker was not started by a Leasehold host (no IPC channel)')
  return { send: (m) => process.send!(m), onMessage: (l) => process.on('message', l) }
}

/** The worker transport for local workers: requests to the host over IPC, answered by the engine. */
export class IpcTransport implements WorkerTransport {
  private nextId = 1
  /** Requests not answered yet. */
  private readonly pending = new Map<number, { resolve(result: unknown): void; reject(error: Error): void }>()
  private closed = false

  constructor(
    private readonly channel: IpcChannel,
    private readonly onCommand: (command: Exclude<FromHost, { type: 'response' }>) => void = () => {},
  ) {
    channel.onMessage((raw) => this.accept(raw))
  }

  private accept(raw: unknown): void {
    const parsed = safeParseFast(FromHost, raw)
    if (!parsed.success) return // not ours; the host validates what it sends too
    const message = parsed.data
    if (message.type !== 'response') return this.onCommand(message)
    const waiter = this.pending.get(message.id)
    this.pending.delete(message.id)
    if (!waiter) return
    if (!message.error) return waiter.resolve(message.result)
    const { status, code, detail } = message.error
    waiter.reject(status === 409 ? new LeaseLostError(code, detail) : new HostError(status, code, detail))
  }

  private call<M extends IpcMethod>(method: M, params: IpcParams<M>): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error('transport closed'))
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      try {
        // Node writes the message as JSON here, and throws when it cannot (report-budget.ts takes it from there).
        this.channel.send({ type: 'request', id, method, params })
      } catch (error) {
        this.pending.delete(id)
        reject(unsentOf(error))
      }
    })
  }

  async exchange(request: IpcParams<'exchange'>, signal?: AbortSignal): Promise<ExchangeAnswer> {
    if (!signal) return (await this.call('exchange', request)) as ExchangeAnswer
    // The host ends a waiting claim when it drains us; an abort here only stops waiting for it.
    return untilAborted(this.call('exchange', request) as Promise<ExchangeAnswer>, signal, noAnswer)
  }

  async acquireFile(request: IpcParams<'acquireFile'>): Promise<FileAcquireAnswer> {
    return (await this.call('acquireFile', request)) as FileAcquireAnswer
  }

  /**
   * The host answers when the file's retry is due, or after up to 30 s; a job stopped meanwhile
   * (canceled, past its max_runtime, its lease lost) leaves the gate at once, as over HTTP and
   * Redis, and the host's late answer is dropped. Waited out, the stop would outlast the handler's
   * grace, and its thread be replaced under the other jobs it runs.
   */
  async waitFileRetry(request: IpcParams<'waitFileRetry'>, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return false
    return untilAborted(this.call('waitFileRetry', request) as Promise<boolean>, signal, () => false)
  }

  async heartbeatFile(request: IpcParams<'heartbeatFile'>): Promise<void> {
    await this.call('heartbeatFile', request)
  }

  async report(problem: IpcParams<'report'>): Promise<void> {
    await this.call('report', problem)
  }

  close(): void {
    this.closed = true
  }
}

/**
 * `call`'s answer, or `onAbort()`'s as soon as `signal` aborts: the request itself is not taken
 * back (its answer, when it comes, finds no one waiting). The listener goes with the call, as the
 * signal may live as long as the worker.
 */
async function untilAborted<T>(call: Promise<T>, signal: AbortSignal, onAbort: () => T): Promise<T> {
  let listener!: () => void
  const aborted = new Promise<T>((resolve) => {
    listener = () => resolve(onAbort())
    signal.addEventListener('abort', listener, { once: true })
  })
  try {
    return await Promise.race([call, aborted])
  } finally {
    signal.removeEventListener('abort', listener)
  }
}
