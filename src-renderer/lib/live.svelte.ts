import { EVENT_TYPES } from '../../src-shared/event-types'
import { ApiError, type LogEvent, type RedisHealth, type StorageChange } from './api'

/**
 * The event types the host writes to its log: the host's own list (src-shared/event-types.ts). An
 * EventSource only hands over named events it has a listener for, so the stream listens to each
 * of these by name.
 */
export { EVENT_TYPES }

/**
 * - `connecting`: the first connection is being made;
 * - `live`: events arrive as they commit;
 * - `reconnecting`: the stream dropped; a fresh ticket is bringing it back,
 *   and it resumes after the last event it saw;
 * - `stopped`: not running (no token, or stopped).
 */
export type StreamStatus = 'connecting' | 'live' | 'reconnecting' | 'stopped'

/** The part of EventSource the stream uses, so tests can hand in a fake. */
export interface EventSourceLike {
  readonly readyState: number
  onopen: ((event: Event) => void) | null
  onerror: ((event: Event) => void) | null
  addEventListener(type: string, listener: (event: MessageEvent<string>) => void): void
  close(): void
}

export interface StreamEndpoints {
  eventTicket(): Promise<{ ticket: string }>
  streamUrl(ticket: string, lastEventId: string | null): string
}

/** Waits before asking for a fresh ticket after a failure: 1 s, 2 s, 4 s … at most 15 s. */
export const reconnectDelayMs = (failures: number): number => Math.min(15_000, 1000 * 2 ** Math.max(0, failures - 1))

/**
 * The host's event stream. `POST /api/events/ticket` opens it; when it drops, a fresh ticket
 * reopens it after the last event seen. The browser is not left to reconnect by itself: it would
 * send the same ticket, which the host refuses (401, an error in the browser's console) once it
 * has lapsed (60 s) or the host has restarted.
 */
export class LiveStream {
  status = $state<StreamStatus>('stopped')
  /** Why the last attempt to (re)connect failed, for the indicator. */
  problem = $state<string | null>(null)
  lastEventId: string | null = null

  private source: EventSourceLike | null = null
  private failures = 0
  private retryTimer: ReturnType<typeof setTimeout> | null = null
  private running = false
  private readonly listeners = new Set<(events: readonly LogEvent[]) => void>()
  /** Events received this turn, handed on together as it ends (see {@link subscribe}). */
  private received: LogEvent[] = []
  private handOnTimer: ReturnType<typeof setTimeout> | null = null
  private readonly gapListeners = new Set<() => void>()
  private readonly resumeListeners = new Set<() => void>()
  private readonly redisListeners = new Set<(health: RedisHealth | null) => void>()
  private readonly storageListeners = new Set<(change: StorageChange) => void>()

  constructor(
    private readonly endpoints: StreamEndpoints,
    private readonly openSource: (url: string) => EventSourceLike = (url) => new EventSource(url),
    /** Told when the host refuses the token (with its answer): the stream then stops. */
    private readonly onUnauthorized: (error: ApiError) => void = () => {},
  ) {}

  /**
   * Listens to every event, in order; returns the function that stops listening. The events that
   * arrive in one turn of the page (a burst: thousands of short jobs make a few events each) are
   * handed on together once it ends, so that each store applies them in one pass and the page is
   * drawn once for them, not once per event.
   */
  subscribe(listener: (events: readonly LogEvent[]) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Called when the stream cannot give everything missed (an older gap, or no event yet to resume after): the stores should reload. */
  onGap(listener: () => void): () => void {
    this.gapListeners.add(listener)
    return () => this.gapListeners.delete(listener)
  }

  /** Called when the stream opens again after a drop, resuming after the last event seen (the host replays what was missed). */
  onResume(listener: () => void): () => void {
    this.resumeListeners.add(listener)
    return () => this.resumeListeners.delete(listener)
  }

  /**
   * Told each `redis` frame (a host with `--redis` sends one first, and again when its connection to
   * Redis changes), and null when the stream (re)opens: what was said of Redis is the host's to say again.
   */
  onRedis(listener: (health: RedisHealth | null) => void): () => void {
    this.redisListeners.add(listener)
    return () => this.redisListeners.delete(listener)
  }

  /**
   * Told each `storage` frame: the host stopped or started taking writes (its database file went,
   * a full disk has room again), or the stream opened while it is read-only. No event says it: a
   * host that lost its database commits none.
   */
  onStorage(listener: (change: StorageChange) => void): () => void {
    this.storageListeners.add(listener)
    return () => this.storageListeners.delete(listener)
  }

  start(): void {
    if (this.running) return
    this.running = true
    this.status = 'connecting'
    void this.open()
  }

  stop(): void {
    this.running = false
    if (this.retryTimer !== null) clearTimeout(this.retryTimer)
    this.retryTimer = null
    this.source?.close()
    this.source = null
    this.status = 'stopped'
    // A stopped stream hands nothing on: a start reads every part again.
    if (this.handOnTimer !== null) clearTimeout(this.handOnTimer)
    this.handOnTimer = null
    this.received = []
  }

  private async open(): Promise<void> {
    let ticket: string
    try {
      ticket = (await this.endpoints.eventTicket()).ticket
    } catch (error) {
      if (!this.running) return
      if (error instanceof ApiError && error.unauthorized) {
        this.stop()
        this.onUnauthorized(error)
        return
      }
      this.problem = error instanceof Error ? error.message : String(error)
      this.retryLater()
      return
    }
    if (!this.running) return
    const source = this.openSource(this.endpoints.streamUrl(ticket, this.lastEventId))
    this.source = source
    source.onopen = () => {
      this.failures = 0
      this.problem = null
      this.status = 'live'
      this.handOn() // what came before the drop, before anything said of the reopen
      for (const listener of this.redisListeners) listener(null)
      // Opened with no event to resume after (the first open, or a reopen before any event came),
      // the stream starts at the host's present: what changed between the stores' reads and now
      // would never come. As after a gap, the stores read again. A resume is told as such: the
      // host replays what was missed, and only what failed while it was away needs reading.
      const listeners = this.lastEventId === null ? this.gapListeners : this.resumeListeners
      for (const listener of listeners) listener()
    }
    source.onerror = () => {
      if (this.source !== source) return
      // Dropped: closed before the browser reconnects with this ticket; a fresh one reopens it.
      source.close()
      this.source = null
      this.retryLater()
    }
    const handle = (message: MessageEvent<string>) => this.receive(message)
    for (const type of EVENT_TYPES) source.addEventListener(type, handle)
    source.addEventListener('message', handle)
    source.addEventListener('gap', () => {
      this.handOn()
      for (const listener of this.gapListeners) listener()
    })
    hearFrames(source, 'redis', this.redisListeners)
    hearFrames(source, 'storage', this.storageListeners)
  }

  private retryLater(): void {
    if (!this.running) return
    this.status = 'reconnecting'
    this.failures += 1
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null
      void this.open()
    }, reconnectDelayMs(this.failures))
  }

  private receive(message: MessageEvent<string>): void {
    let event: LogEvent
    try {
      event = JSON.parse(message.data) as LogEvent
    } catch {
      return
    }
    if (message.lastEventId) this.lastEventId = message.lastEventId
    else if (event.id !== undefined) this.lastEventId = String(event.id)
    this.status = 'live'
    this.received.push(event)
    this.handOnTimer ??= setTimeout(() => this.handOn(), 0)
  }

  /** Hands on the events received so far, together. */
  private handOn(): void {
    if (this.handOnTimer !== null) clearTimeout(this.handOnTimer)
    this.handOnTimer = null
    const events = this.received
    if (events.length === 0) return
    this.received = []
    for (const listener of this.listeners) listener(events)
  }
}

/** Hands the data of a stream's frames of one type (not events: `redis`, `storage`) to its listeners; a frame that is not JSON is dropped. */
function hearFrames<T>(source: EventSourceLike, type: string, listeners: Set<(data: T) => void>): void {
  source.addEventListener(type, (message) => {
    let data: T
    try {
      data = JSON.parse(message.data) as T
    } catch {
      return
    }
    for (const listener of listeners) listener(data)
  })
}
