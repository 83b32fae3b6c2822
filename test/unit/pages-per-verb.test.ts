/**
 * A commit costs a WAL frame per page it changed (docs/performance.md, "Where a commit's time
 * goes"), so each verb of a job's life writes only the B-trees its rows live in: the job, its
 * lease and its events. No index of QUEUED jobs (they are in memory, in pick order), of ACTIVE
 * leases, of job or lease ids, of a job's events, of the counted events or of finish times gets
 * an entry (each used to).
 * Read from the WAL frames of each verb's commit, mapped to their B-tree by SQLite's dbstat table.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { SECOND } from '../../src-main/engine/rules/clock'
import { aJob } from '../helpers/engine'
import { openFileEngine, tempDir } from './support'

describe('the pages a job writes', () => {
  it('each verb of its life writes only the B-trees its rows live in', () => {
    const dir = tempDir()
    try {
      const path = join(dir.dir, 'leasehold.db')
      const { engine, sqlite, clock } = openFileEngine(path)
      const pageSize = sqlite.pragma('page_size', { simple: true }) as number
      const life = (record: (verb: string) => void) => {
        engine.submit(aJob())
        record('submit')
        const { lease } = engine.requestLease({ worker_id: 'w' }) as { lease: { id: string } }
        record('grant')
        clock.advance(SECOND)
        engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
        record('heartbeat')
        engine.release({ lease_id: lease.id, worker_id: 'w', status: 'SUCCEEDED' })
        record('release')
      }
      for (let i = 0; i < 300; i++) life(() => {}) // the tables past their first pages
      sqlite.pragma('wal_autocheckpoint = 0')
      sqlite.pragma('wal_checkpoint(TRUNCATE)')
      let offset = 32 // the WAL header; then frames of a 24-byte header and a page
      const written = new Map<string, Set<number>>()
      const record = (verb: string) => {
        const wal = readFileSync(`${path}-wal`)
        for (; offset + 24 + pageSize <= wal.length; offset += 24 + pageSize) {
          if (!written.has(verb)) written.set(verb, new Set())
          written.get(verb)!.add(wal.readUInt32BE(offset))
        }
      }
      for (let i = 0; i < 50; i++) life(record)
      const owner = new Map((sqlite.prepare('SELECT pageno, name FROM dbstat').all() as { pageno: number; name: string }[]).map((r) => [r.pageno, r.name]))
      // Page 1 (the file's header: its size) and the pointer map change as the file grows; every other page is a B-tree's.
      const btrees = (verb: string) => [...new Set([...written.get(verb)!].filter((page) => page !== 1 && owner.has(page)).map((page) => owner.get(page)))].sort()
      expect(btrees('submit')).toEqual(['events', 'jobs'])
      expect(btrees('grant')).toEqual(['events', 'jobs', 'leases'])
      expect(btrees('heartbeat')).toEqual(['events', 'jobs', 'leases'])
      expect(btrees('release')).toEqual(['events', 'jobs', 'leases'])
      sqlite.close()
    } finally {
      dir.cleanup()
    }
  })
})
