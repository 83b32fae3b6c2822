import { randomUUID } from 'node:crypto'
import type { StoreContext } from './context'

/**
 * The settings table: one text value per key, for what the engine keeps between starts that is
 * not a row of its own (the counters' reservations, where the caches' start reads from, the
 * operator's capacity).
 */

/** The value stored under `key`, or undefined when none is. */
export function readSetting(ctx: StoreContext, key: string): string | undefined {
  return ctx.one<{ value: string }>('SELECT value FROM settings WHERE key = ?', key)?.value
}

/** Stores `value` under `key`, inside the transaction in progress (rolled back with it). */
export function writeSetting(ctx: StoreContext, key: string, value: string): void {
  ctx.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', key, value)
}

const DATABASE_ID_KEY = 'database_id'

/**
 * This database's id: random, made at the first call (its own transaction) and kept. It names the
 * host that runs on it to other hosts (the Redis prefix a host claims, redis/prefix-claim.ts), so
 * a host restarted on the same data dir is known as the same one.
 */
export function databaseId(ctx: StoreContext): string {
  const stored = readSetting(ctx, DATABASE_ID_KEY)
  if (stored) return stored
  const id = randomUUID()
  ctx.transact(() => writeSetting(ctx, DATABASE_ID_KEY, id))
  return id
}
