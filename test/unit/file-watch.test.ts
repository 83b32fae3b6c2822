/**
 * The host's once-a-second look at its files (db/file-watch.ts) tells a database file or log cut
 * short in place from every change SQLite makes to them itself: the file shrunk by a retention
 * pass, the log started over by the writer after a checkpoint. A file cut short and not seen goes
 * on taking commits that no later start can read.
 */
import { statSync, truncateSync } from 'node:fs'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Checkpointer } from '../../src-main/db/checkpointer'
import { DatabaseFiles, databaseCutShort, logCutShort } from '../../src-main/db/file-watch'
import { scratchDatabase, tempDir } from './support'

let dir: string
let cleanup: () => void
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => cleanup())

const PAGE = 4096
const DATABASE_HEAD = Buffer.from('SQLite format 3\0', 'latin1')
const LOG_HEAD = Buffer.from([0x37, 0x7f, 0x06, 0x82])

describe('the rules', () => {
  it('a database file is cut short when it is less than a page, not whole pages, or its first page is gone', () => {
    expect(databaseCutShort(10 * PAGE, DATABASE_HEAD, PAGE)).toBe(false)
    expect(databaseCutShort(0, Buffer.alloc(0), PAGE)).toBe(true)
    expect(databaseCutShort(10 * PAGE + 100, DATABASE_HEAD, PAGE)).toBe(true)
    expect(databaseCutShort(10 * PAGE, Buffer.alloc(16), PAGE)).toBe(true) // cut to nothing, then written into again: a hole where page 1 was
  })

  it('a log is cut short when it is shorter than it was, or its header is gone; an empty log that never held anything is not', () => {
    expect(logCutShort(0, Buffer.alloc(0), 0)).toBe(false)
    expect(logCutShort(32 + 100 * (24 + PAGE), LOG_HEAD, 32 + 10 * (24 + PAGE))).toBe(false)
    expect(logCutShort(32 + 10 * (24 + PAGE), Buffer.from([0x37, 0x7f, 0x06, 0x83]), 32 + 10 * (24 + PAGE))).toBe(false)
    expect(logCutShort(0, Buffer.alloc(0), 32 + 10 * (24 + PAGE))).toBe(true)
    expect(logCutShort(32 + 20 * (24 + PAGE), Buffer.alloc(4), 32 + 10 * (24 + PAGE))).toBe(true) // cut, then written past
  })
})

describe('the look at a host-like connection', () => {
  /** A database opened as the host opens it, its checkpointer's thread beside it, and the look. */
  function aDatabase() {
    const { path, sqlite, insert } = scratchDatabase(dir)
    const files = new DatabaseFiles(path, sqlite.pragma('page_size', { simple: true }) as number)
    const checkpointer = new Checkpointer({ path, durability: 'normal', intervalMs: 5, idleMs: 20, files: files.opened!, onError: () => {} })
    const close = async () => {
      await checkpointer.stop()
      sqlite.close()
      files.close()
    }
    return { path, sqlite, insert, files, checkpointer, close }
  }

  it('the normal life never trips it: files grown, shrunk by retention passes, logs checkpointed and started over', async () => {
    const { path, sqlite, insert, files, checkpointer, close } = aDatabase()
    const looks: unknown[] = []
    let shrunk = 0
    try {
      for (let round = 0; round < 20; round++) {
        for (let i = 0; i < 300; i++) {
          insert.run('x'.repeat(2000))
          checkpointer.committed()
          if (i % 50 === 0) looks.push(files.lost())
        }
        await new Promise((resolve) => setTimeout(resolve, 10)) // the thread's passes run
        looks.push(files.lost())
        const before = statSync(path).size
        sqlite.exec('DELETE FROM scratch')
        looks.push(files.lost())
        sqlite.exec('PRAGMA incremental_vacuum') // as a retention pass gives space back
        looks.push(files.lost())
        sqlite.pragma('wal_checkpoint(PASSIVE)') // as it copies each step back (engine/store/storage.ts)
        looks.push(files.lost())
        await new Promise((resolve) => setTimeout(resolve, 10))
        looks.push(files.lost())
        if (statSync(path).size < before) shrunk++
      }
    } finally {
      await close()
    }
    expect(shrunk).toBeGreaterThan(0) // the file did shrink under the look
    expect(looks.filter((look) => look !== null)).toEqual([])
  })

  it('costs microseconds: it runs every second on the main thread', () => {
    const { insert, files, close } = aDatabase()
    try {
      for (let i = 0; i < 100; i++) insert.run('x')
      const started = performance.now()
      for (let i = 0; i < 1000; i++) files.lost()
      const each = ((performance.now() - started) * 1000) / 1000
      console.log(`one look: ${each.toFixed(1)} µs`)
      expect(each).toBeLessThan(500) // a bound that holds on a loaded VM: ~27 µs is what it takes, ~18 of them the two stats the look made before
    } finally {
      void close()
    }
  })

  it("a database file cut to nothing in place is seen, and the checkpointer's thread does not write it back to its length meanwhile", async () => {
    const { path, insert, files, checkpointer, close } = aDatabase()
    try {
      for (let i = 0; i < 100; i++) insert.run('x'.repeat(2000))
      truncateSync(path, 0)
      expect(files.lost()).toEqual({ file: 'database', how: 'cut short' })
      const passes = checkpointer.passes
      for (let i = 0; i < 100; i++) {
        insert.run('y'.repeat(2000))
        checkpointer.committed()
      }
      while (checkpointer.passes < passes + 3) await new Promise((resolve) => setTimeout(resolve, 5))
      // A pass would have copied the log's pages into the file, page 1 among them, as long as before.
      expect(statSync(path).size).toBe(0)
      expect(files.lost()).toEqual({ file: 'database', how: 'cut short' })
    } finally {
      await close()
    }
  })

  it('a database file cut to part of a page is seen', async () => {
    const { path, insert, files, close } = aDatabase()
    try {
      for (let i = 0; i < 100; i++) insert.run('x'.repeat(2000))
      truncateSync(path, statSync(path).size - 100)
      expect(files.lost()).toEqual({ file: 'database', how: 'cut short' })
    } finally {
      await close()
    }
  })

  it('a log cut to nothing in place is seen, and so is one the next commits were written past the cut into', async () => {
    const { path, insert, files, close } = aDatabase()
    try {
      for (let i = 0; i < 100; i++) insert.run('x'.repeat(2000))
      expect(files.lost()).toBeNull() // the log's length is seen
      truncateSync(`${path}-wal`, 0)
      expect(files.lost()).toEqual({ file: 'log', how: 'cut short' })
      for (let i = 0; i < 100; i++) insert.run('y'.repeat(2000))
      expect(files.lost()).toEqual({ file: 'log', how: 'cut short' })
    } finally {
      await close()
    }
  })
})
