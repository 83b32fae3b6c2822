import BetterSqlite3, { type Database, type Statement } from 'better-sqlite3'

/** Transaction control, which a full disk does not refuse (COMMIT is refused: it is the write). */
const CONTROL = /^\s*(BEGIN|ROLLBACK|SAVEPOINT|RELEASE)\b/i
const COMMIT = /^\s*(COMMIT|END)\b/i

/**
 * Makes one connection's writes fail as a full (or failing) disk makes them fail, at the
 * database layer: while `code` is set, every statement that writes, and every COMMIT, throws
 * better-sqlite3's own SqliteError with that code (SQLITE_FULL, SQLITE_IOERR_WRITE…), before it
 * runs. Reads go on. Whatever the engine does with transactions, a write never lands.
 */
export class StorageFaultInjector {
  /** The SQLite error code writes fail with, or null while the disk is fine. */
  code: string | null = null
  /** How many statements were refused. */
  refused = 0
  private readonly restore: () => void

  constructor(private readonly db: Database) {
    const proto = Object.getPrototypeOf(db.prepare('SELECT 1')) as Record<'run' | 'get' | 'all' | 'iterate', (...args: unknown[]) => unknown>
    const originals = { run: proto.run, get: proto.get, all: proto.all, iterate: proto.iterate }
    const injector = this
    for (const name of ['run', 'get', 'all', 'iterate'] as const) {
      const original = originals[name]
      proto[name] = function (this: Statement, ...args: unknown[]) {
        injector.check(this)
        return original.apply(this, args)
      }
    }
    const exec = db.exec
    db.exec = function (this: Database, sql: string) {
      if (injector.code && !CONTROL.test(sql)) injector.refuse()
      return exec.call(this, sql)
    }
    this.restore = () => {
      Object.assign(proto, originals)
      db.exec = exec
    }
  }

  /** Puts the original methods back. */
  dispose(): void {
    this.restore()
  }

  private check(statement: Statement): void {
    if (!this.code || statement.database !== this.db) return
    if (COMMIT.test(statement.source) || (!statement.reader && !CONTROL.test(statement.source))) this.refuse()
  }

  private refuse(): never {
    this.refused += 1
    const message = this.code === 'SQLITE_FULL' ? 'database or disk is full' : 'disk I/O error'
    throw new BetterSqlite3.SqliteError(message, this.code!)
  }
}
