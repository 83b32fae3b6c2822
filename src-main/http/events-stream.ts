import type { Context } from 'koa'
import type { StorageMode } from '../db/storage-mode'
import { randomBytes } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import { PassThrough } from 'node:stream'
import type { Engine, Event } from '../engine'
import { iso } from '../engine/rules/clock'
import { z } from 'zod'
import type { LogLimiter } from '../../src-shared/log-limiter'
import { LAST_EVENT_ID, NoBody } from './schemas'
import { bearerToken } from './guard'
import { HttpError } from './http-error'
import { type Api, type RedisReport, route } from './route'
import { EventTicket, RedisHealth, StorageChange, StreamEvent, streamEvent, StreamGap } from './views/system'

/** How long a ticket from POST /api/events/ticket opens the stream (EventSource reconnects reuse it). */
export const TICKET_TTL_MS = 60_000
/** At most this many missed events are replayed on resume; older ones are announced as a gap, not replayed. */
export const MAX_REPLAY = 10_000
const PING_MS = 15_000

/**
 * Short-lived tickets for the event stream: a browser's EventSource cannot send an
 * Authorization header, so an authorised client trades its token for a ticket it can put in
 * the URL (the long-lived token never appears in a URL or a log). A ticket remembers the token
 * that took it: it opens the stream only while that token opens the API (a revoked admin
 * token's tickets open nothing), and the stream it opened lasts as long.
 */
export class StreamTickets {
  private readonly tickets = new Map<string, { expiresAt: number; token: string }>()

  issue(now: number, token: string): { ticket: string; expires_at: number } {
    for (const [ticket, { expiresAt }] of this.tickets) if (expiresAt <= now) this.tickets.delete(ticket)
    const ticket = randomBytes(24).toString('base64url')
    const expiresAt = now + TICKET_TTL_MS
    this.tickets.set(ticket, { expiresAt, token })
    return { ticket, expires_at: expiresAt }
  }

  /** The token that took `ticket`, while the ticket is valid; else null. */
  tokenOf(ticket: string, now: number): string | null {
    const issued = this.tickets.get(ticket)
    return issued !== undefined && issued.expiresAt > now ? issued.token : null
  }
}

function sseEvent(event: Event): string {
  return `id: ${event.id}\nevent: ${event.event_type}\ndata: ${JSON.stringify(streamEvent(event))}\n\n`
}

/** A `redis` frame: no id, so a client resuming after it resumes after the last logged event. */
function sseRedis(health: RedisHealth): string {
  return `event: redis\ndata: ${JSON.stringify(health)}\n\n`
}

/** A `storage` frame: no id, as a `redis` frame. */
function sseStorage(mode: StorageMode): string {
  const change: StorageChange = { storage: mode.state, reason: mode.reason, detail: mode.detail }
  return `event: storage\ndata: ${JSON.stringify(change)}\n\n`
}

/**
 * A reader for which the host holds more than this many bytes of frames it has not taken (not
 * counting the replay it was opened with) is cut off, its connection closed with what was held
 * for it: about 3,000 events, so that it can resume within the replay of {@link MAX_REPLAY}.
 */
export const MAX_UNSENT_BYTES = 1024 * 1024

/** One open stream: where its frames go, who opened it, and what the bound on it counts. */
interface Reader {
  readonly stream: PassThrough
  readonly res: ServerResponse
  /** The token that opened it (by itself, or by the ticket it took): the stream lasts while it opens the API. */
  readonly token: string
  /** Bytes written after the replay (live frames, pings, `redis` frames): only these count toward {@link MAX_UNSENT_BYTES}. */
  live: number
}

/**
 * The open streams, and the one place live events become frames. The frames are the same for
 * every reader (a stream has no filter, and a ticket opens the same stream as the token), so each
 * commit's frames are built once, as one Buffer, and that Buffer is written to every reader.
 */
export class EventStreams {
  private readonly readers = new Set<Reader>()
  /** The frames of the commit being told (see {@link EventStreams.listen}). */
  private gathered = ''
  /** Stops listening to the engine: set while there are readers. */
  private stopListening: (() => void) | null = null

  constructor(
    private readonly engine: Engine,
    private readonly redis: RedisReport | undefined,
    private readonly log: LogLimiter,
    /** Whether a token opens the API now: the request guard's rule (guard.ts isApiToken). */
    readonly opensApi: (token: string) => boolean,
    /** The host's storage mode as it changes (the host stops or starts taking writes), when the host tells it. */
    private readonly onStorageMode?: (listener: (mode: StorageMode) => void) => () => void,
    private readonly maxUnsentBytes = MAX_UNSENT_BYTES,
  ) {}

  /**
   * Adds a stream whose replay has been written: it gets every commit from now on. Called in the
   * step that replayed, so that no event can commit in between.
   */
  add(stream: PassThrough, res: ServerResponse, token: string): void {
    const reader: Reader = { stream, res, token, live: 0 }
    this.stopListening ??= this.listen()
    this.readers.add(reader)
    const ping = setInterval(() => this.write(reader, ': ping\n\n'), PING_MS)
    const leave = () => {
      clearInterval(ping)
      this.remove(reader)
      stream.end()
    }
    res.once('close', leave)
    stream.once('close', leave)
  }

  closeAll(): void {
    for (const reader of this.readers) reader.stream.end()
  }

  /**
   * Ends the streams whose token no longer opens the API (an admin token revoked): the host
   * calls it as it sees a revoke, so a stream stops within the second a request with that token
   * takes to be refused. Its client's next ticket is then refused (401).
   */
  endRevoked(): void {
    for (const reader of this.readers) if (!this.opensApi(reader.token)) reader.stream.end()
  }

  /** Listens to the engine (and Redis's health, and the storage mode) for the readers; answers the function that stops. */
  private listen(): () => void {
    // A commit's events leave in one write (a write per event cost a system call each, and a
    // commit of a busy pool holds dozens); they are gathered as the events are told, so that a
    // commit made by another commit listener still leaves after the events before it.
    const stops = [
      this.engine.onEvent((event) => (this.gathered += sseEvent(event))),
      this.engine.onCommit(() => {
        if (this.gathered === '') return
        const frames = Buffer.from(this.gathered)
        this.gathered = ''
        for (const reader of this.readers) this.write(reader, frames)
      }),
    ]
    // No event can tell it: a host that lost its database commits none.
    if (this.onStorageMode) stops.push(this.onStorageMode((mode) => this.tell(sseStorage(mode))))
    if (this.redis) {
      stops.push(
        this.redis.onHealth((health) => this.tell(sseRedis(health))),
      )
    }
    return () => {
      for (const stop of stops) stop()
      this.gathered = ''
    }
  }

  private remove(reader: Reader): void {
    this.readers.delete(reader)
    if (this.readers.size > 0 || this.stopListening === null) return
    this.stopListening()
    this.stopListening = null
  }

  /** A frame of no event, to every reader. */
  private tell(frame: string): void {
    const chunk = Buffer.from(frame)
    for (const reader of this.readers) this.write(reader, chunk)
  }

  private write(reader: Reader, chunk: Buffer | string): void {
    // What the host holds for it: in the stream, and in the response and its socket not yet
    // taken by the kernel. The replay was written first, so it is taken first.
    const held = reader.stream.writableLength + reader.stream.readableLength + reader.res.writableLength
    const unsent = Math.min(held, reader.live)
    if (unsent > this.maxUnsentBytes) return this.cut(reader, unsent)
    reader.live += chunk.length
    reader.stream.write(chunk)
  }

  /**
   * Closes a reader's connection, dropping what was held for it: it may be partway through a
   * frame, which a client discards, and resumes after its last whole one (docs/api.md).
   */
  private cut(reader: Reader, unsent: number): void {
    this.remove(reader)
    reader.stream.destroy()
    reader.res.destroy()
    this.log.line(
      'event-stream-cut',
      `leasehold: an event stream's reader fell behind (${(unsent / 1024 / 1024).toFixed(1)} MiB of frames not taken) and was cut off; it can resume with Last-Event-ID`,
    )
  }
}

const EventsQuery = z.strictObject({
  ticket: z.string().optional().meta({ description: 'From POST /api/events/ticket, for a client that cannot send the Authorization header (EventSource)' }),
  last_event_id: z.string().regex(LAST_EVENT_ID, { error: 'must be an event id' }).optional().meta({ description: 'Resume after this event (as the Last-Event-ID header does)' }),
})
type EventsQuery = z.infer<typeof EventsQuery>
const EventsHeaders = z.object({
  'Last-Event-ID': z.string().regex(LAST_EVENT_ID).optional().meta({ description: 'Resume after this event: the missed ones are replayed first' }),
})

/**
 * GET /api/events/stream: server-sent events of the event log. A client resuming with
 * `Last-Event-ID` (or `?last_event_id=`) first gets what it missed from SQLite, then live
 * events as they commit. POST /api/events/ticket trades the token for a stream ticket.
 */
export const eventsApi: Api = {
  tag: 'events',
  description: 'The event log, live (server-sent events)',
  prefix: '/api/events',
  routes: [
    route({
      method: 'POST',
      path: '/ticket',
      id: 'createEventTicket',
      summary: 'A ticket that opens the event stream for 60 s (its reconnects too)',
      body: NoBody,
      answer: EventTicket,
      grouped: false,
      run: (_, { tickets }, call) => {
        // The guard let the request in by its bearer token: only a token that opens the API reaches here.
        const { ticket, expires_at } = tickets.issue(Date.now(), bearerToken(call.header('authorization')) ?? '')
        return { ticket, expires_at: iso(expires_at) }
      },
    }),
    route({
      method: 'GET',
      path: '/stream',
      id: 'streamEvents',
      summary: 'Server-sent events of the event log; resume with Last-Event-ID',
      description:
        'Each event is a frame `id: <event id>`, `event: <type>`, `data: <StreamEvent>`. A client resuming with `Last-Event-ID` (or `?last_event_id=`) first gets what it missed, then live events as they commit. What it cannot get is announced by a `gap` frame whose data is a StreamGap (the event ids it may have missed, not replayed) and whose id is its `missed_to`: events after its Last-Event-ID that were deleted (retention, a purge: the replay starts past the largest deleted id), or more than 10,000 events (only the newest 10,000 are replayed). A Last-Event-ID larger than any the log gave (from a database since restored from a backup) gets a gap over the whole log and no replay. A reader for which the host holds more than 1 MiB of frames not taken is cut off (its connection closed); it resumes with `Last-Event-ID` after its last whole frame. `: ping` comments keep the connection open. When Redis carries the queues (`leasehold serve --redis`), a `redis` frame (no id; its data a RedisHealth) comes first, again whenever the connection to Redis is made or lost, and every 5 s while Redis is away. A `storage` frame (no id; its data a StorageChange) comes each time the host stops or starts taking writes (its database file deleted, a full disk that has room again), and first on a stream opened while it is read-only.',
      // The ticket is read by the request guard too, before the route runs (guard.ts).
      query: EventsQuery,
      header: EventsHeaders,
      security: [{ bearer: [] }, { ticket: [] }],
      answer: z.union([StreamEvent, StreamGap, RedisHealth, StorageChange]),
      answerDoc: { description: 'A stream of frames; the schema is that of one frame’s data', mediaType: 'text/event-stream' },
      errors: { 400: 'invalid_request: Last-Event-ID is not an event id' },
      grouped: false,
      koa: (ctx, { engine, streams, tickets, redis, storageMode }, query) =>
        stream(ctx, query, engine, streams, opener(ctx, query, streams, tickets), redis, storageMode()),
    }),
  ],
}

/**
 * The token a stream was opened with: the request's bearer token if it opens the API, else the
 * one that took its ticket (the guard let the request in by one of them).
 */
function opener(ctx: Context, query: EventsQuery, streams: EventStreams, tickets: StreamTickets): string {
  const bearer = bearerToken(ctx.get('authorization') || undefined)
  if (bearer !== null && streams.opensApi(bearer)) return bearer
  const byTicket = query.ticket !== undefined ? tickets.tokenOf(query.ticket, Date.now()) : null
  if (byTicket === null) throw new HttpError('unauthorized', 'A valid Authorization: Bearer token is required')
  return byTicket
}

function stream(ctx: Context, query: EventsQuery, engine: Engine, streams: EventStreams, token: string, redis: RedisReport | undefined, mode: StorageMode): void {
  // The query's last_event_id was held to LAST_EVENT_ID with the query; the header wins over it.
  const header = ctx.get('last-event-id')
  if (header !== '' && !LAST_EVENT_ID.test(header)) throw new HttpError('invalid_request', 'Last-Event-ID: must be an event id')
  const resumeFrom = header || (query.last_event_id ?? '')
  const stream = new PassThrough()
  ctx.req.socket.setTimeout(0)
  ctx.req.socket.setNoDelay(true)
  ctx.status = 200
  ctx.set('Content-Type', 'text/event-stream; charset=utf-8')
  ctx.set('Cache-Control', 'no-store')
  ctx.set('X-Accel-Buffering', 'no')
  ctx.body = stream

  stream.write('retry: 2000\n\n')
  if (redis) stream.write(sseRedis(redis.health()))
  // A client that opens (or resumes) while the host is read-only is told so before any event.
  if (mode.state === 'read_only') stream.write(sseStorage(mode))
  if (resumeFrom !== '') replay(engine, stream, Number(resumeFrom))
  // Replay and joining the readers run in one synchronous step: no event can commit in between.
  streams.add(stream, ctx.res, token)
}

function replay(engine: Engine, stream: PassThrough, after: number): void {
  // What the reader missed and is not sent is announced first; then the newest MAX_REPLAY events at most.
  const { gap, events } = engine.replayAfter(after, MAX_REPLAY)
  if (gap) writeGap(stream, gap)
  for (const event of events) stream.write(sseEvent(event))
}

/**
 * A gap frame, with `missed_to` as its id: the reader's place in the log is then past the gap,
 * so a reader that drops again before another event resumes after it (a browser's EventSource
 * sends it as Last-Event-ID), instead of being told of the same gap at each reconnect.
 */
function writeGap(stream: PassThrough, gap: StreamGap): void {
  stream.write(`id: ${gap.missed_to}\nevent: gap\ndata: ${JSON.stringify(gap)}\n\n`)
}
