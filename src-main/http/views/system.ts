/**
 * The routes every API shares (health, capacity, leases, workers, the event stream) as the
 * wire shows them. Each view's zod schema sits beside the function that renders it.
 */
import { z } from 'zod'
import type { ActiveLease as ActiveLeaseRecord, CapacityFigures, Event } from '../../engine'
import { iso } from '../../engine/rules/clock'
import type { WorkerInfo } from '../../worker-roster/directory'
import { IsoTime } from '../schemas'
import { QueueEvent, queueEvent } from './queue'

/** What the host says of Redis when it carries the queues (leasehold serve --redis). */
export const RedisHealth = z
  .object({
    url: z.string().meta({ description: 'The Redis URL, its password hidden' }),
    connected: z.boolean().meta({ description: 'Whether Redis answers: connected, and its answer to the check made every second came within 3 s' }),
    unanswered_ms: z.number().int().nullable().meta({ description: 'While it is not connected, how long since Redis last answered (or since the host started, if it never has); null while it answers' }),
    prefix: z.string().meta({ description: 'The prefix of every key the host writes (--redis-prefix)' }),
    prefix_taken_by: z
      .string()
      .nullable()
      .meta({ description: 'Another host found using this prefix (as it names itself), or a prefix that nests with it (one begins the other: then followed by that prefix); the host then no longer uses Redis until it is restarted. Null while the prefix is its own' }),
    refused: z
      .string()
      .nullable()
      .meta({ description: "Redis's words when it answers the host with a refusal: connected, it takes nothing the host sends (out of memory at its maxmemory, a key of another type); not connected, it refused the connection (WRONGPASS: its user deleted or its password changed), or the server at the URL does not speak the Redis protocol (an HTTP port), said so. Null while it takes what it is sent" }),
    waiting: z.number().int().meta({ description: 'Messages committed and not yet in Redis (the outbox); they are published once it answers' }),
    oldest_wait_ms: z.number().int().nullable().meta({ description: 'How long the oldest of them has waited; null when none waits' }),
  })
  .meta({ id: 'RedisHealth' })
export type RedisHealth = z.infer<typeof RedisHealth>

const STORAGE_STATE = z.enum(['read_write', 'read_only'])

/** A `storage` frame's data: the host's storage mode, told on the event stream as it changes. */
export const StorageChange = z
  .object({
    storage: STORAGE_STATE.meta({ description: 'As GET /api/health says it, from now on' }),
    reason: z.string().nullable().meta({ description: 'Why the host is read-only (as GET /api/health says it); null while it takes writes' }),
    detail: z.string().nullable().meta({ description: 'What happened and what to do, as GET /api/storage says it; null while it takes writes' }),
  })
  .meta({ id: 'StorageChange' })
export type StorageChange = z.infer<typeof StorageChange>

export const Health = z
  .object({
    ok: z.literal(true),
    version: z.string(),
    storage: STORAGE_STATE.meta({
      description:
        'read_only: reads work and every write is refused, because the disk was full at start (507 until space returns) or the database file or its log was deleted or replaced while the host ran, or the disk failed a sync (503 until a restart); GET /api/storage says what to do',
    }),
    reason: z.string().optional().meta({ description: 'Why the host is read-only: `disk full`, `database file deleted`, `database file replaced`, `database log deleted`, `database log replaced`, `database file cut short`, `database log cut short`, `disk sync failed`' }),
    redis: RedisHealth.optional().meta({ description: 'Present when Redis carries the queues: a host whose Redis is away still takes jobs (ok stays true)' }),
  })
  .meta({ id: 'Health' })

export const Capacity = z
  .object({
    total_units: z.number().int(),
    busy_rating: z.number().min(0).max(10).meta({ description: '0 idle … 10 fully busy' }),
    busy_mode: z.enum(['auto', 'manual']).meta({ description: 'auto: measured from the host; manual: set by an operator' }),
    usable: z.number().int().meta({ description: 'floor(total × (10 − busy) / 10)' }),
    leased: z.number().int().meta({ description: 'Units held by ACTIVE leases' }),
    available: z.number().int().meta({ description: 'usable − leased; negative when the busy rating rose under running work' }),
  })
  .meta({ id: 'Capacity', description: 'Capacity and the busy rating (docs/capacity.md)' })
export type Capacity = z.infer<typeof Capacity>

export const capacityView = (figures: CapacityFigures): Capacity => ({ ...figures })

export const ActiveLease = z
  .object({
    lease_id: z.string(),
    job_id: z.string(),
    job_type: z.string(),
    addon_id: z.string().nullable(),
    worker_id: z.string(),
    cost_units: z.number().int(),
    granted_at: IsoTime,
    last_heartbeat_at: IsoTime,
    expires_at: IsoTime,
  })
  .meta({ id: 'ActiveLease', description: 'An ACTIVE job lease' })
export type ActiveLease = z.infer<typeof ActiveLease>

export const ActiveLeases = z
  .object({ now: IsoTime.meta({ description: "The host's clock when it read the leases" }), leases: z.array(ActiveLease) })
  .meta({ id: 'ActiveLeases' })
export type ActiveLeases = z.infer<typeof ActiveLeases>

export function activeLeasesView(now: number, leases: readonly ActiveLeaseRecord[]): ActiveLeases {
  return {
    now: iso(now),
    leases: leases.map((l) => ({
      lease_id: l.id,
      job_id: l.job_id,
      job_type: l.job_type,
      addon_id: l.addon_id,
      worker_id: l.worker_id,
      cost_units: l.cost_units,
      granted_at: iso(l.granted_at),
      last_heartbeat_at: iso(l.last_heartbeat_at),
      expires_at: iso(l.expires_at),
    })),
  }
}

export const Worker = z
  .object({
    worker_id: z.string(),
    kind: z.enum(['local', 'external', 'redis']).meta({ description: 'local: the host\'s pool; external: over HTTP; redis: over Redis Streams only' }),
    pid: z.number().int().nullable().meta({ description: "A local worker's process id" }),
    state: z.enum(['starting', 'ready', 'busy', 'draining', 'active', 'silent']).meta({
      description:
        'Local: starting, ready (idle), busy (holding a lease) or draining. External and redis: active, busy while it holds a lease, or silent when not heard from for 60 s (twice the longest claim wait: it stopped, died or cannot reach the host); forgotten after an hour of silence',
    }),
    current_job_ids: z.array(z.string()),
    last_seen_at: IsoTime,
    started_at: IsoTime,
    restarts: z.number().int(),
  })
  .meta({ id: 'Worker' })
export type Worker = z.infer<typeof Worker>

export const WorkerList = z.object({ workers: z.array(Worker) }).meta({ id: 'WorkerList' })

export function workerView(w: WorkerInfo): Worker {
  return { ...w, state: w.state as Worker['state'], last_seen_at: iso(w.last_seen_at), started_at: iso(w.started_at) }
}

export const EventTicket = z
  .object({ ticket: z.string().meta({ description: 'Opens GET /api/events/stream as ?ticket=' }), expires_at: IsoTime })
  .meta({ id: 'EventTicket' })

/** The `data` of each event on the stream (its SSE `event:` is the type, its `id:` the id). */
export const StreamEvent = QueueEvent.extend({
  job_id: z.string().nullable().meta({ description: 'The job the event belongs to, if any' }),
}).meta({ id: 'StreamEvent', description: 'The data of one event on the stream' })
export type StreamEvent = z.infer<typeof StreamEvent>

export function streamEvent(event: Event): StreamEvent {
  return { ...queueEvent(event), job_id: event.job_id }
}

/** The data of a `gap` frame: events older than the replay window, announced instead of replayed. */
export const StreamGap = z.object({ missed_from: z.number().int(), missed_to: z.number().int() }).meta({ id: 'StreamGap' })
export type StreamGap = z.infer<typeof StreamGap>

export const OpenApiDocument = z.looseObject({ openapi: z.string() }).meta({ description: 'This document' })
export type OpenApiDocument = z.infer<typeof OpenApiDocument>
