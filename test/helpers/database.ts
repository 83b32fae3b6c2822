import BetterSqlite3, { type Database } from 'better-sqlite3'
import type { Engine } from '../../src-main/engine'

/**
 * The database under an engine, as a test reads and arranges it: the SQLite file (or in-memory
 * database) the engine keeps its truth in, reached the way an operator's `sqlite3` would reach
 * it — not through the engine's internals, so a test written against it survives any change of
 * the engine's inside. An engine a test helper built is remembered with the handle it was given;
 * for a host's engine a second connection is opened on its file (it sees what is committed).
 */
const handles = new WeakMap<Engine, Database>()

/** Records the handle an engine was built on; returns the engine. */
export function onDatabase(engine: Engine, db: Database): Engine {
  handles.set(engine, db)
  return engine
}

/** The SQLite handle on `engine`'s database (see the module's note). */
export function database(engine: Engine): Database {
  let db = handles.get(engine)
  if (db === undefined) {
    const file = engine.databaseFile
    if (file === '' || file === ':memory:') throw new Error('an in-memory engine built outside test/helpers: record its handle with onDatabase')
    db = new BetterSqlite3(file)
    db.pragma('busy_timeout = 5000')
    handles.set(engine, db)
  }
  return db
}

/** Queries on `engine`'s database: one row, every row, or a write. */
export function sql(engine: Engine) {
  const db = database(engine)
  return {
    one: <T>(query: string, ...params: unknown[]): T | undefined => db.prepare(query).get(...params) as T | undefined,
    all: <T>(query: string, ...params: unknown[]): T[] => db.prepare(query).all(...params) as T[],
    run: (query: string, ...params: unknown[]): void => void db.prepare(query).run(...params),
  }
}
