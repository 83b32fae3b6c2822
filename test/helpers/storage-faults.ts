import BetterSqlite3, { type Database, type Statement } from 'better-sqlite3'
import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ServeProcess, startServe } from './process'
import { connectionPath } from '../../src-main/db/connection'

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
  /** COMMITs still to fail with {@link commitCode}, whatever {@link code} says (see {@link failCommits}). */
  private commitFaults = 0
  private commitCode = 'SQLITE_IOERR_FSYNC'
  private changesAtCommit = 0
  private readonly totalChanges: Statement
  private readonly restore: () => void

  constructor(private readonly db: Database) {
    const proto = Object.getPrototypeOf(db.prepare('SELECT 1')) as Record<'run' | 'get' | 'all' | 'iterate', (...args: unknown[]) => unknown>
    const originals = { run: proto.run, get: proto.get, all: proto.all, iterate: proto.iterate }
    const injector = this
    this.totalChanges = db.prepare('SELECT total_changes()').pluck()
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
      if (injector.commitFaults > 0 && COMMIT.test(sql) && injector.wroteSinceLastCommit()) {
        injector.commitFaults -= 1
        injector.refuse(injector.commitCode)
      }
      return exec.call(this, sql)
    }
    this.restore = () => {
      Object.assign(proto, originals)
      db.exec = exec
    }
  }

  /**
   * Fails the next `times` COMMITs with `code` as a sync the disk failed fails them: every other
   * statement runs, so the commit that settles the outcome (db/commit-outcome.ts) works unless
   * it is one of the `times`.
   */
  failCommits(code: string, times = 1): void {
    this.commitCode = code
    this.commitFaults = times
    this.wroteSinceLastCommit()
  }

  /**
   * Whether rows changed since this was last asked: a COMMIT of a transaction that wrote nothing
   * (the reaper's, with nothing due) syncs nothing, so no sync of it can fail.
   */
  private wroteSinceLastCommit(): boolean {
    const total = this.totalChanges.get() as number
    const wrote = total !== this.changesAtCommit
    this.changesAtCommit = total
    return wrote
  }

  /** Puts the original methods back. */
  dispose(): void {
    this.restore()
  }

  private check(statement: Statement): void {
    if (statement.database !== this.db) return
    if (this.commitFaults > 0 && COMMIT.test(statement.source) && this.wroteSinceLastCommit()) {
      this.commitFaults -= 1
      this.refuse(this.commitCode)
    }
    if (!this.code) return
    if (COMMIT.test(statement.source) || (!statement.reader && !CONTROL.test(statement.source))) this.refuse()
  }

  private refuse(code = this.code!): never {
    this.refused += 1
    const message = code === 'SQLITE_FULL' ? 'database or disk is full' : 'disk I/O error'
    throw new BetterSqlite3.SqliteError(message, code)
  }
}

/** Why the libfiu tests cannot run here, or null when `fiu-run` and `fiu-ctrl` are installed (Debian: fiu-utils). */
export function fiuMissing(): string | null {
  if (process.platform !== 'linux') return 'libfiu fault injection needs Linux'
  const found = ['fiu-run', 'fiu-ctrl'].every((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0)
  return found ? null : 'fiu-run is not installed (apt-get install fiu-utils)'
}

/** A `leasehold serve` process run under `fiu-run -x`: libfiu's POSIX wrappers preloaded, faults off until {@link FiuHost.fiu} turns them on. */
export interface FiuHost extends ServeProcess {
  token: string
  /** Runs a libfiu control command in the process (`enable name=posix/io/sync/fsync,failinfo=5,onetime`); throws when fiu-ctrl says it did not take. */
  fiu(command: string): void
  call(path: string, json?: unknown): Promise<Response>
}

/**
 * Starts `leasehold serve` on `dataDir` under fiu-run, with no local workers and no timer that
 * writes on its own. Its SQLite reads no URIs (SQLITE_USE_URI=0), so it names the file by its
 * path, with the default VFS (src-main/db/connection.ts): the tests' own connections may then
 * open the file beside it, to shape its log or to make its reads go to the disk.
 */
export async function fiuServe(dataDir: string, args: string[] = [], fiuCommands: string[] = []): Promise<FiuHost> {
  const launcher = ['fiu-run', '-x', ...fiuCommands.flatMap((command) => ['-c', command])]
  const served = await startServe(['--data-dir', dataDir, '--port', '0', '--busy', '0', '--stats-interval-s', '3600', ...args], { SQLITE_USE_URI: '0' }, launcher)
  // libfiu removes its control pipes as its process exits; a killed one leaves them in the temp directory.
  const pid = served.child.pid!
  void served.exited.then(() => {
    for (const end of ['in', 'out']) rmSync(join(tmpdir(), `fiu-ctrl-${pid}.${end}`), { force: true })
  })
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
  return {
    ...served,
    token,
    fiu: (command) => fiuControl(pid, command),
    call: (path, json) =>
      fetch(`${served.url}${path}`, {
        method: json === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${token}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
        body: json === undefined ? undefined : JSON.stringify(json),
      }),
  }
}

/**
 * Sends one libfiu command to the process and waits for its answer. fiu-ctrl exits 0 even when
 * the process has no control pipe or refused the command; it says so on stdout, so that is read.
 */
export function fiuControl(pid: number, command: string): void {
  const said = execFileSync('fiu-ctrl', ['-c', command, String(pid)], { encoding: 'utf8' })
  if (/error/i.test(said)) throw new Error(`fiu-ctrl -c '${command}' ${pid} did not take: ${said.trim()}`)
}

/**
 * Makes the writes of every connection to the file at `path` fail with `code`, from its first
 * open on: for a start that fails while it sets up or migrates a file (openDatabase opens its own
 * connection). Only statements whose SQL matches `only` are refused. Returns the undo.
 */
export function failWritesToFile(path: string, code: string, only: RegExp = /./): () => void {
  const scratch = new BetterSqlite3(':memory:')
  const proto = Object.getPrototypeOf(scratch.prepare('SELECT 1')) as Record<'run' | 'get' | 'all', (...args: unknown[]) => unknown>
  scratch.close()
  const databaseProto = BetterSqlite3.prototype as unknown as { exec: (sql: string) => unknown }
  const originals = { run: proto.run, get: proto.get, all: proto.all, exec: databaseProto.exec }
  const refuse = (database: Database, sql: string, writes: boolean) => {
    if (connectionPath(database.name) === path && writes && only.test(sql)) throw new BetterSqlite3.SqliteError('disk I/O error', code)
  }
  for (const name of ['run', 'get', 'all'] as const) {
    proto[name] = function (this: Statement, ...args: unknown[]) {
      refuse(this.database, this.source, !this.reader && !CONTROL.test(this.source))
      return originals[name].apply(this, args)
    }
  }
  databaseProto.exec = function (this: Database, sql: string) {
    refuse(this, sql, !CONTROL.test(sql))
    return originals.exec.call(this, sql)
  }
  return () => {
    Object.assign(proto, { run: originals.run, get: originals.get, all: originals.all })
    databaseProto.exec = originals.exec
  }
}

/**
 * Makes the file at `path` refuse writes for the test, and returns how to undo it, or why it
 * cannot (the test then skips): root writes through file modes, so as root the file is bind-mounted
 * read-only over itself (mount must be permitted); otherwise its mode is made 0444.
 */
export function refuseWrites(path: string): { undo: () => void } | { cannot: string } {
  if (process.getuid?.() !== 0) {
    chmodSync(path, 0o444)
    return { undo: () => chmodSync(path, 0o600) }
  }
  let unmount = () => {}
  try {
    execFileSync('mount', ['--bind', path, path], { stdio: 'pipe' })
    unmount = () => execFileSync('umount', [path], { stdio: 'ignore' })
    execFileSync('mount', ['-o', 'remount,ro,bind', path], { stdio: 'pipe' })
  } catch (error) {
    unmount()
    return { cannot: `as root only a read-only mount refuses a write, and mount is not permitted here (${(error as Error).message.split('\n')[0]})` }
  }
  return { undo: () => unmount() }
}

