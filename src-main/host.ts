import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { autoBusyRating, CpuBusyMeter, type MachineCpu, readCpuTimes } from './busy/measure'
import { Dispatch } from './dispatch/dispatch'
import { HOST_FILE, LOCK_FILE } from '../src-shared/client-target'
import { ClockWaiters } from './dispatch/clock-waiters'
import { MAX_LONG_POLL_MS } from './dispatch/long-poll'
import { type HostConfig, localWorkerSlots } from './config'
import { connectionPath, walVfsLoadFailure } from './db/connection'
import { Checkpointer } from './db/checkpointer'
import { isFailedSync } from './db/commit-outcome'
import { ReadThread } from './db/read-thread'
import { connectionLimit, openFilesLimit } from './http/connection-limit'
import { backupDatabase } from './db/backup'
import { checkIntegrityInBackground, integrityChecksEnded, integrityLine, type IntegrityReport } from './db/integrity'
import { clearHostMark, DatabaseOpenError, lastHostMark, markFailedStart, openDatabase, openOnFullDisk, type OpenedDatabase, setHostMark, shareDatabase, WAL_AUTOCHECKPOINT_PAGES } from './db/open'
import { DISK_FULL, mayWrite, probeDelays, type StorageMode, SYNC_FAILED, syncFailedDetail } from './db/storage-mode'
import { cutShortDetail, DatabaseFiles, FILE_WATCH_INTERVAL_MS, type FileLoss, keepCommits, keptDetail, refuseWrites } from './db/file-watch'
import { Engine } from './engine'
import { type Clock, earliest, systemClock } from './engine/rules/clock'
import { counted } from '../src-shared/plural'
import { answerError, type ErrorAnswer, readOnlyAnswer } from './error-answer'
import { localUrl } from './data-dir/dashboard-link'
import { createDataDir, type DataDirLock, HostStartError, keepDataPrivate, lockDataDir, removeHostFile, storageStartError, unlockedHostError, writeHostFile } from './data-dir/lock'
import { loadOrCreateToken, writeTokenFile } from './data-dir/token'
import { checkRequest, guardInput, ownHostNames } from './http/guard'
import { createHttpApp, pathOf } from './http/server'
import { attachFront } from './http/front'
import { servedInTurn } from './http/in-turn'
import { holdConnections } from './http/connection-gate'
import { boundHeapGrowth } from '../src-shared/heap-growth'
import { writeAllowVariable } from '../src-shared/write-allow'
import { LogLimiter } from '../src-shared/log-limiter'
import { prefixTakenMessage } from '../src-shared/redis-streams'
import { forkSpawner, type Spawner } from './pool/spawn'
import { WorkerPool } from './pool/supervisor'
import { type PassHealth, Pruner } from './retention/pruner'
import { storageReport } from './retention/storage-report'
import { type HostIdentity, hostIdentity } from './redis/prefix-claim'
import { RedisLeaseHold } from './redis/lease-hold'
import { RedisRelay } from './redis/relay'
import { RedisWorkerRequests } from './redis/worker-requests'
import { tokensMatch } from './http/guard'
import { ScopedTokens, unreadableTokensLine } from './data-dir/worker-tokens'
import { ReaperTimer } from './reaper/timer'
import { ScheduleTimer } from './schedules/timer'
import { VERSION } from './version'
import { WorkerDirectory } from './worker-roster/directory'

/** A running host: the engine, its timers and the HTTP server over one database. */
export interface Host {
  /** The base URL clients use, e.g. http://127.0.0.1:7878 */
  readonly url: string
  readonly token: string
  readonly engine: Engine
  readonly pool: WorkerPool | null
  /** Retention's timer: its last pass (GET /api/storage), and `runPass()` to run one now. */
  readonly pruner: Pruner
  /**
   * The background integrity check a start after an unclean shutdown runs (null when the last
   * host closed the database): settles with its report, or null if it could not run or was cut
   * short by stop().
   */
  readonly integrityCheck: Promise<IntegrityReport | null> | null
  /** Whether the host takes writes, or serves reads only because its disk was full at start (db/storage-mode.ts). */
  storageMode(): StorageMode
  /** Stops taking requests, lets in-flight ones finish, stops the timers, closes the database. */
  stop(): Promise<void>
}

export interface HostOptions {
  clock?: Clock
  migrationsFolder?: string
  log?: (line: string) => void
  /** The built dashboard to serve at `/` (default: out/renderer of this checkout). */
  rendererDir?: string
  /** Seconds since the user last touched keyboard or mouse (the desktop app's powerMonitor); counts in the auto busy rating. */
  userIdleSeconds?: () => number
  /** The machine's CPU counters for the auto busy rating, in place of the operating system's (a test's idle machine). */
  machineCpu?: () => MachineCpu
  /** better-sqlite3's native addon to load instead of node_modules' (the desktop app's Electron build). */
  nativeBinding?: string
  /** How local workers are started: child_process.fork under Node (the default), utilityProcess under Electron. */
  spawn?: Spawner
  /** The limit on open files the connections are held to (default: this process's, `ulimit -n`; null: none). */
  openFiles?: number | null
}

const BUSY_INTERVAL_MS = 2_000
/** The least time the first busy sample of a start reads the CPU over: a shorter one reads a few clock ticks. */
const FIRST_BUSY_READING_MS = 100
/** Slow-client limits: a client that trickles its headers or body cannot hold a connection. */
const HEADERS_TIMEOUT_MS = 10_000
const REQUEST_TIMEOUT_MS = 2 * MAX_LONG_POLL_MS // room above the longest long-poll
const KEEP_ALIVE_TIMEOUT_MS = 5_000
/** How long a stop waits for the body of a request still to come before it closes the connection (the request has run nothing). */
const UNFINISHED_BODY_GRACE_MS = 2_000
/** How long a stop waits for a client to read what it was sent before it closes the connection (a client that never reads would hold the stop for ever). */
const UNREAD_ANSWER_GRACE_MS = 5_000
/** How long a start's first reaper pass waits for the requests remote workers sent over Redis while no host read them. */
const BACKLOG_LIMIT_MS = 10_000

/** out/renderer of this checkout, seen from src-main/host.ts or from the bundle in out/cli/ (scripts/cli-bundle.js). */
const DEFAULT_RENDERER_DIR = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../out/renderer' : '../renderer', import.meta.url))

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]'])

/** The host's API token, as a window on a host already running reads it too (src-main/electron.ts). */
export { loadOrCreateToken }

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}

/** Cleanup steps of a start in progress, run newest first should the start fail. */
type Undo = (() => void | Promise<void>)[]

async function undoAll(undo: Undo): Promise<void> {
  for (const step of undo.reverse()) {
    try {
      await step()
    } catch {
      // The start already failed with the error that matters; a step that cannot undo goes on.
    }
  }
}

/**
 * Starts a host from a config: the composition root shared by `leasehold serve` and Electron.
 * A start that fails at any step, before or after listening, undoes the steps before it (the
 * server closed, the database closed, the data dir unlocked) and rejects: no half-started host
 * keeps taking requests.
 */
export async function startHost(config: HostConfig, options: HostOptions = {}): Promise<Host> {
  // The host's process (the app's main process, `leasehold serve`) keeps its heap near what it uses.
  boundHeapGrowth()
  createDataDir(config.dataDir)
  // Before anything else is read or written: a second host on this data dir stops here.
  const lock = lockDataDir(config.dataDir, options.nativeBinding)
  const undo: Undo = [() => lock.release()]
  try {
    return await startLocked(config, options, lock, undo)
  } catch (error) {
    await undoAll(undo)
    throw unlockedHostError(error, lock, config.dataDir) ?? storageStartError(error, config.dataDir) ?? error
  }
}

async function startLocked(config: HostConfig, options: HostOptions, lock: DataDirLock, undo: Undo): Promise<Host> {
  const log = options.log ?? ((line: string) => console.error(line))
  const clock = options.clock ?? systemClock
  const mode: StorageMode = { state: 'read_write', reason: null, detail: null }
  /** While read-only, what a worker's write is answered, as HTTP answers it (pool/ipc-host.ts). */
  const writesRefused = (): ErrorAnswer | null => (mode.state === 'read_only' ? readOnlyAnswer(mode, config.dataDir) : null)
  // Told to the event stream's readers each time the mode changes: no event can say it (a host
  // that lost its database commits none), and an open dashboard shows it at once.
  const modeListeners = new Set<(mode: StorageMode) => void>()
  const modeChanged = (): void => {
    for (const listener of modeListeners) listener({ ...mode })
  }
  // Started anyway, the host would answer every worker token 401 and say why only in its log.
  // Before the database opens: a refused start has migrated nothing.
  const unreadableTokens = unreadableTokensLine(config.dataDir)
  if (unreadableTokens) throw new HostStartError(unreadableTokens)
  const opened = openForStart(config, options, mode, log)
  const { sqlite } = opened
  undo.push(() => void sqlite.close())
  // The database is this host's alone, so no host runs here: a host.json the lock kept, naming a
  // live process, was a dead host's whose pid another process has taken since (data-dir/lock.ts).
  if (lock.liveHostFile) removeHostFile(join(config.dataDir, HOST_FILE))
  // Once the database opens: a start refused on a file that is not Leasehold's leaves the data dir without a token made for it.
  const token = loadOrCreateToken(config.dataDir, config.token)
  // A host's mark and no log (db/open.ts): a file restored from a backup an older Leasehold made
  // (its backups kept the mark), one copied without its log, or a killed host's whose log went
  // after it. A start cannot tell which, so the line is true of each, and sends no log back
  // beside a restored file (it would be copied into it).
  const leftOpen = lastHostMark(sqlite)
  const markedWithoutLog = leftOpen !== null && !leftOpen.logRecovered && !opened.uncleanShutdown
  if (markedWithoutLog) {
    const path = databasePathOf(config)
    log(
      `leasehold: ${path} carries the mark of a host that had it open (${leftOpen.mark}), and its log ${path}-wal is not there. ` +
        "A file restored from a backup (an older Leasehold's backups keep the mark) or copied without its log reads so, and has lost nothing. " +
        'Only a file whose host was killed and whose -wal was then deleted or moved away has lost what that host committed after its last checkpoint, if anything; ' +
        'this host has written to the file since, so that -wal cannot go back beside it (it would copy older pages over newer ones): never put a log beside this file',
    )
  }
  const uncleanShutdown = opened.uncleanShutdown || leftOpen !== null
  // A start that fails leaves the file's mark as it found it (written only where the start wrote one).
  let marked = false
  undo.push(() => {
    if (marked || uncleanShutdown) markFailedStart(sqlite, leftOpen, uncleanShutdown, new Date(clock.now()))
  })
  keepDataPrivate(config.dataDir)
  const walVfsFailure = walVfsLoadFailure(options.nativeBinding)
  if (walVfsFailure) log(`leasehold: ${walVfsFailure}`)

  const limiter = new LogLimiter(log, () => clock.now())
  const engine = new Engine({
    db: sqlite,
    clock,
    config: {
      leaseTtlS: config.leaseTtlS,
      heartbeatGraceS: config.heartbeatGraceS,
      claimTtlS: config.claimTtlS,
      maxAttempts: config.maxAttempts,
    },
  })
  /**
   * A database restored from a backup: the ids the backed-up host gave after the copy (events,
   * stream messages) are not given again (engine/store/counters.ts). Before anything writes: here
   * at a start that takes writes, else once writes are taken again.
   */
  const goPastRestoredBackup = (): void => {
    const restored = engine.goPastRestoredBackup()
    if (restored) log(`leasehold: the database is a backup taken ${new Date(restored.takenAt).toISOString()}: event ids go on from ${restored.eventId} and stream message ids from ${restored.messageId}, past any its host gave after the copy`)
  }
  if (mode.state === 'read_write') goPastRestoredBackup()
  // Redis carries the queues' streams beside SQLite (docs/redis.md): a Redis that is down delays
  // nothing but the relay. It starts before the writers, on a read-only start too: it only reads
  // the database (the outbox), and a second host on its prefix is refused before anything runs.
  const relay = config.redisUrl ? new RedisRelay({ engine, url: config.redisUrl, prefix: config.redisPrefix, log, identity: ownIdentity(engine, config.dataDir) }) : null
  undo.push(() => relay?.stop())
  // Before anything reads or writes the prefix's keys: a second host on it stops here (redis/prefix-claim.ts).
  await relay?.start()
  if (relay?.claim.state === 'taken') throw new HostStartError(prefixTakenMessage(config.redisPrefix, config.redisUrl!, relay.claim.takenBy!, relay.claim.takenForMs))
  // Remote workers' heartbeats come over Redis alone: their leases do not expire while the host cannot hear it.
  const leaseHold = relay ? new RedisLeaseHold(engine, relay, log) : null
  undo.push(() => leaseHold?.stop())

  // A timer that throws (a full disk) would end the process: each tick catches, logs at most
  // once a minute, and the next tick tries again.
  const tick = (name: string, run: () => void) => guardedTick(name, run, limiter, config.dataDir)
  /** A step done once, at a start or a stop, that never throws: a failure is logged with what it leaves. */
  const once = (name: string, leaves: string, run: () => void): void => {
    try {
      run()
    } catch (error) {
      log(`leasehold: ${name} failed (${failureReason(error, config.dataDir)}); ${leaves}`)
    }
  }
  const machineCpu = options.machineCpu
  const busyMeter = new CpuBusyMeter(machineCpu && (() => readCpuTimes(machineCpu)))
  const reportBusy = (): void => {
    if (engine.reportMeasuredBusy(autoBusyRating(busyMeter.sample(), options.userIdleSeconds?.() ?? null))) dispatch.capacityGrew()
  }
  // The reaper (below) wakes by the earliest moment waited for; a wait that begins sooner brings it forward.
  let reaper: ReaperTimer | null = null
  const clockWaiters = new ClockWaiters(clock, (at) => reaper?.dueBy(at))
  const directory = new WorkerDirectory(() => clock.now())
  // Scoped tokens (leasehold token): a worker's may only run jobs (HTTP's worker routes, remote
  // workers over Redis); an admin's may do what the host's own token does, and be revoked.
  const scopedTokens = new ScopedTokens(config.dataDir, log)
  // Each claim names the job types and queues its worker takes: a job none of them takes says so
  // as it waits. A claim is handed work only once a revoke written since it came has ended it.
  const dispatch = new Dispatch(engine, { onClaim: (workerId, takes) => directory.claims(workerId, takes), beforeGrant: () => scopedTokens.recheck() })
  undo.push(() => dispatch.close())
  const scheduleLog = timerHealth('the schedule timer', limiter, config.dataDir)
  const schedules = new ScheduleTimer(engine, { clock, onError: (error) => scheduleLog.failed(error), onFired: () => scheduleLog.ok() })
  undo.push(() => schedules.stop())
  const timers: NodeJS.Timeout[] = []
  undo.push(() => timers.forEach(clearInterval))
  // Retention: finished jobs older than --retain-days go, in short steps between requests.
  const pruner = new Pruner({ engine, retainDays: config.retainDays, health: timerHealth('the pruner', limiter, config.dataDir), log })
  undo.push(() => pruner.stop())

  const isWorkerToken = (given: string) => scopedTokens.scopeOf(given) === 'worker'
  const isAdminToken = (given: string) => scopedTokens.scopeOf(given) === 'admin'
  // Workers on other machines that reach the host through Redis alone.
  const remoteWorkers = relay && leaseHold
    ? new RedisWorkerRequests({
        url: config.redisUrl!,
        prefix: config.redisPrefix,
        deps: { engine, dispatch, clockWaiters, readOnly: writesRefused },
        directory,
        leaseHold,
        scopeOf: (given) => (tokensMatch(given, token) || isAdminToken(given) ? 'host' : isWorkerToken(given) ? 'worker' : null),
        isRevokedToken: (given) => scopedTokens.isRevoked(given),
        bodyLimitBytes: config.bodyLimitBytes,
        claim: relay.claim,
        redisHealth: relay,
        log,
      })
    : null
  remoteWorkers?.start()
  undo.push(() => remoteWorkers?.stop())
  let port = config.port
  // --allowed-host's names, and once the server listens its own address (guard.ts ownHostNames).
  let allowedHosts: readonly string[] = config.allowedHosts
  const policy = {
    token,
    isWorkerToken,
    isAdminToken,
    isRevokedToken: (given: string) => scopedTokens.isRevoked(given),
    get allowedHosts() {
      return allowedHosts
    },
    get port() {
      return port
    },
  }
  // Reads that may walk the whole jobs table (a search) run off the main thread (db/read-thread.ts).
  const databaseFile = connectionPath(sqlite.name)
  // The database and its log as the host opened them: watched below, and the only files its other connections open.
  const files = databaseFile === '' || databaseFile === ':memory:' ? null : DatabaseFiles.of(sqlite, databaseFile)
  undo.push(() => files?.close())
  const readThread =
    databaseFile === '' || databaseFile === ':memory:'
      ? null
      : new ReadThread({
          path: databaseFile,
          nativeBinding: options.nativeBinding,
          fallback: engine.readOnMain,
          onDown: (error, retryMs) => log(`leasehold: the read thread stopped (${error.message}); searches of the jobs run on the main thread until it starts again (tried in ${retryMs / 1000} s, then less often)`),
          onUp: () => log('leasehold: the read thread is back; searches of the jobs run on it again'),
        })
  undo.push(() => readThread?.stop())
  let backups: Promise<unknown> = Promise.resolve()
  const http = createHttpApp({
    engine,
    readJobs: readThread ? (read) => readThread.all(read) : undefined,
    dispatch,
    clockWaiters,
    directory,
    version: VERSION,
    policy,
    bodyLimitBytes: config.bodyLimitBytes,
    storage: () => storageReport(engine, pruner),
    checkIntegrity: (depth) => checkIntegrityInBackground(connectionPath(sqlite.name), { depth, nativeBinding: options.nativeBinding, signal: checkAbort.signal }),
    // One at a time: each reads the whole file through the host's connection.
    backup: () => {
      const next = backups.catch(() => {}).then(() => backupDatabase(sqlite, join(config.dataDir, 'backups'), new Date(clock.now()), options.nativeBinding))
      backups = next
      return next
    },
    storageMode: () => ({ ...mode }),
    onStorageMode: (listener) => {
      modeListeners.add(listener)
      return () => modeListeners.delete(listener)
    },
    rendererDir: options.rendererDir ?? DEFAULT_RENDERER_DIR,
    log,
    redis: relay ?? undefined,
  })
  // A revoke ends what the token opened and is still open: the claims it waits in (they ask
  // again, and are refused) and the event streams it opened, as its next request is refused.
  undo.push(
    scopedTokens.watch(() => {
      dispatch.endWaits('A worker token was revoked: claims ask again')
      http.endRevokedStreams()
    }),
  )
  // While read-only, a request that may write is refused here, before any route: no write
  // reaches the disk, and a worker is told to wait rather than handed work it could not finish.
  // A request the guard refuses (no token, a foreign Host) goes on to be refused as usual.
  /** Set as the server stops: each answer then closes its connection, as the front's do (Front.closeAfterAnswers). */
  let closing = false
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    if (closing) res.setHeader('Connection', 'close')
    if (mode.state === 'read_only' && mayWrite(req.method ?? 'GET', req.url ?? '/') && checkRequest(guardInput(req, pathOf(req.url)), policy) === null) {
      return refuseWrite(req, res, readOnlyAnswer(mode, config.dataDir))
    }
    http.listener(req, res)
  }
  const server = createServer(
    {
      headersTimeout: HEADERS_TIMEOUT_MS,
      requestTimeout: REQUEST_TIMEOUT_MS,
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      // How often Node checks those limits (default 30 s): a trickling client is cut off on time.
      connectionsCheckingInterval: 1_000,
      // A request without a Host is the guard's to refuse (400 in the API's shape), not Node's bare 400.
      requireHostHeader: false,
    },
    // A request sent ahead of its turn waits for it, unread (http/in-turn.ts).
    servedInTurn(listener),
  )
  // Connections are refused before they take the descriptors the host and its workers need (http/connection-limit.ts).
  const openFiles = options.openFiles === undefined ? openFilesLimit() : options.openFiles
  const maxConnections = connectionLimit(openFiles, config.workers)
  if (maxConnections !== null) {
    server.maxConnections = maxConnections
    server.on('drop', () =>
      limiter.line(
        'connections refused',
        `leasehold: refusing connections: ${maxConnections} are open, as many as the file descriptor limit leaves room for (ulimit -n ${openFiles}); raise it to serve more at once`,
      ),
    )
  }
  // The requests that come at the rate of jobs are read straight from the socket (http/front.ts).
  const front = attachFront(server, {
    lane: http.lane,
    bodyLimitBytes: config.bodyLimitBytes,
    serving: () => mode.state === 'read_write',
    keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
  })
  /** Node's requests whose answers have not closed, each with its answer. */
  const nodeRequestsInFlight = new Map<IncomingMessage, ServerResponse>()
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    nodeRequestsInFlight.set(request, response)
    response.once('close', () => nodeRequestsInFlight.delete(request))
  })
  /**
   * From now on every answer closes its connection: those to come, and those of the requests in
   * flight that are not yet answered (a claim that waits, answered by the stop itself), whose
   * `Connection` the listener set as they came, before the stop.
   */
  const closeAfterAnswers = (): void => {
    closing = true
    for (const response of nodeRequestsInFlight.values()) if (!response.headersSent) response.setHeader('Connection', 'close')
    front.closeAfterAnswers()
  }
  /**
   * Closes the connections with no request in flight, or all of them when none is. A request
   * whose body is still coming has run nothing, and its client may hold it up to the request
   * timeout (60 s): once the stop has waited {@link UNFINISHED_BODY_GRACE_MS} for it, its
   * connection is closed too. (A body on its way arrives well within that.) A connection whose
   * client does not read what it was sent (an answer that fills the kernel's buffers, and any
   * request sent ahead behind it) would hold the stop for as long as the client likes: once the
   * stop has waited {@link UNREAD_ANSWER_GRACE_MS}, it is closed. A request with nothing waiting
   * to be read is the host's own work in progress, and is waited for.
   */
  const closeConnections = (sweepStartedAt: number): void => {
    const waited = Date.now() - sweepStartedAt
    for (const request of nodeRequestsInFlight.keys()) {
      if ((!request.complete && waited >= UNFINISHED_BODY_GRACE_MS) || (request.socket.writableLength > 0 && waited >= UNREAD_ANSWER_GRACE_MS)) request.socket.destroy()
    }
    if (nodeRequestsInFlight.size + front.inFlight === 0) {
      server.closeAllConnections()
      front.closeAll()
    } else {
      server.closeIdleConnections()
      front.closeIdle()
    }
  }
  // Requests Node refuses before Koa sees them still get the API's error shape.
  server.on('clientError', http.clientError)
  server.on('connect', http.connect) // CONNECT reaches only these listeners: 501, as any method the server does not know
  server.on('checkExpectation', http.checkExpectation)
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => http.checkContinue(req, res, () => server.emit('request', req, res)))

  let pool: WorkerPool | null = null
  undo.push(() => pool?.stop(0))

  const checkAbort = new AbortController()
  undo.push(() => checkAbort.abort())
  let integrityCheck: Promise<IntegrityReport | null> | null = null
  let checkpointer: Checkpointer | null = null
  engine.onEveryCommit(() => checkpointer?.committed()) // counted for the checkpointer: a burst wakes it
  /** The host started read-only and has since taken writes again. */
  let resumed = false
  undo.push(() => checkpointer?.stop())

  /** The writers of {@link startWriters} that run on timers, stopped: at the stop, once the host's file went, or once a sync failed. */
  const stopWriters = async (): Promise<void> => {
    for (const timer of timers) clearInterval(timer)
    reaper?.stop()
    await schedules.stop()
    await pruner.stop() // a pass in progress ends at its next step, before the database closes
  }

  /**
   * The disk failed a sync, a commit's or the checkpointer's (db/commit-outcome.ts
   * `isFailedSync`): the host can no longer know what is on the disk, since a sync that fails
   * may leave pages unwritten that a later sync reports as written. It takes no more writes until
   * a restart, which reads the file again as after a crash (the host's mark stays) and checks it.
   * The failed commit's own caller was answered by its settling (db/commit-outcome.ts).
   */
  const syncFailed = (error: unknown, where: string): void => {
    if (mode.state === 'read_only') return // writes stopped already: nothing more is written to be lost
    mode.state = 'read_only'
    mode.reason = SYNC_FAILED
    mode.detail = syncFailedDetail(error, where, config.dataDir)
    modeChanged()
    log(`leasehold: ${mode.detail}`)
    // Called from inside a failed commit: the connection is left alone until its stack unwinds.
    queueMicrotask(() => {
      try {
        engine.flush() // a group still open fails in SQLite below, or commits: its callers hear which
      } catch (error) {
        log(`leasehold: after the failed sync, the writes in progress could not be ended (${(error as Error).message})`)
      }
      stopTakingWrites()
    })
  }
  engine.onSyncFailed((error) => syncFailed(error, 'a commit'))

  /**
   * What the host does once it can no longer trust what is on its disk (a failed sync, its file or
   * log gone): every write fails in SQLite from here, whoever asks for it, no claim waits, and
   * every writer stops — the timed ones, the checkpointer (a later pass would copy the log over
   * pages a failed sync lost, or into a file now at the path) and the relay (what waits stays in
   * the outbox for the restart). Only a restart takes writes again.
   */
  const stopTakingWrites = (): void => {
    try {
      refuseWrites(sqlite)
    } catch (refusal) {
      log(`leasehold: writes could not be turned off in SQLite (${(refusal as Error).message}); the host still refuses them`)
    }
    dispatch.close()
    if (probe) clearTimeout(probe)
    void stopWriters()
    void checkpointer?.stop()
    void relay?.stop()
  }

  /**
   * Everything that writes: the checkpointer, the capacity flags, the reaper, the schedules (with
   * their catch-up), the samplers, the pruner and the local workers. At start, or once a
   * read-only host has space again; until then none of them runs, so none fails or spins.
   */
  const startWriters = async (): Promise<void> => {
    goPastRestoredBackup() // done at the start already, unless it began read-only
    // Checkpoints off the main thread (db/checkpointer.ts). Should the thread fail, the main
    // connection's own checkpoint still bounds the log, as it did before there was a thread.
    const checkpoints = timerHealth('the checkpointer', limiter, config.dataDir)
    checkpointer = new Checkpointer({
      path: connectionPath(sqlite.name),
      durability: config.durability,
      nativeBinding: options.nativeBinding,
      files: files?.opened ?? undefined,
      onPass: () => checkpoints.ok(),
      onError: (error, stopped) => {
        if (isFailedSync(error)) return syncFailed(error, 'the checkpointer')
        if (!stopped) return checkpoints.failed(error)
        log(`leasehold: the checkpointer thread stopped (${error.message}); the log is checkpointed by the writer alone, every ${WAL_AUTOCHECKPOINT_PAGES.toLocaleString('en-US')} pages`)
      },
    })
    try {
      applyCapacityFlags(engine, config)
    } catch (error) {
      // At a start this ends the start, as it always did; once a read-only host has space again,
      // the writers must start all the same (the disk may have just enough room for some writes).
      if (!resumed) throw error
      log(`leasehold: --total-units/--busy were not applied (${(error as Error).message}); they are at the next start`)
    }
    // On auto the machine's rating is read before anything is leased: until its first sample the
    // host would take a busy machine for an idle one, and a start at login would lease it all.
    if (engine.getCapacity().busy_mode === 'auto') await delay(Math.max(0, FIRST_BUSY_READING_MS - busyMeter.msSinceLast()))
    tick('the busy sampler', reportBusy)() // a reading not written (a full disk) is taken again in 2 s
    once('the host\'s mark', 'a start after this host is killed will not know to check the file', () => {
      setHostMark(sqlite, new Date(clock.now())) // taken away at a clean stop: a start that finds it knows this host was killed
      marked = true
    })
    // The local workers of the host before this one died with it (however it ended): their
    // leases expire now, not after their TTL, and before the pool reuses their ids.
    once('the expiry of the last host\'s local leases', 'the reaper expires them at the end of their TTL', () => {
      const expired = engine.expireLeasesOfLastHostsLocalWorkers()
      if (expired > 0) log(`leasehold: ${expired} lease(s) of the last host's local workers expired (host_restarted)`)
    })
    // Folder and file leases that overlap (granted before the gate covered folders) keep the gate's
    // rule from here on: the one granted first keeps its path, the later ones are revoked.
    once('the revocation of overlapping file leases', 'they are looked for again at the next start', () => {
      const overlaps = engine.revokeOverlappingFiles()
      if (overlaps.length === 0) return
      const each = overlaps.slice(0, 10).map(({ revoked, kept }) => `${revoked.file} of ${revoked.owner_id} (${kept.owner_id} holds ${kept.file} since before it)`)
      if (overlaps.length > 10) each.push(`${overlaps.length - 10} more (their FILE_LEASE_REVOKED events name them)`)
      log(`leasehold: ${overlaps.length} file lease(s) revoked (overlapped): each overlapped a lease granted before it, which keeps its path; writes under them are refused (file_lease_lost): ${each.join('; ')}`)
    })
    // A laptop that wakes: what the workers hold counts its silence from the wake (engine.noticeSleep).
    undo.push(
      engine.onSleep((sleptMs, renewed) => {
        if (renewed.leases + renewed.claims + renewed.files === 0) return
        const held = [counted(renewed.leases, 'lease'), counted(renewed.claims, 'claim'), counted(renewed.files, 'file lease')].join(', ')
        log(`leasehold: the machine slept, or its clock was set ahead, for ${Math.round(sleptMs / 1000).toLocaleString('en-US')} s: ${held} count their holders' silence from now (nobody could be heard meanwhile)`)
      }),
    )
    const reap = tick('the reaper', () => {
      leaseHold?.check()
      engine.reap()
    })
    // What remote workers sent over Redis while no host read it (heartbeats, completions, failures)
    // counts first, each judged at the moment Redis stored it: a worker Redis heard before its
    // lease's expiry was not silent, only unread. Then leases granted before a restart expire on
    // time: reap once before serving anything.
    if ((await remoteWorkers?.caughtUp(BACKLOG_LIMIT_MS)) === 'limit') {
      log(`leasehold: the requests remote workers sent over Redis while no host read them were not all answered within ${BACKLOG_LIMIT_MS / 1000} s; leases are expired without waiting for the rest`)
    }
    reap()
    // Recurring schedules: one timer for the next firing; firings missed while the host was down
    // are caught up now (one run each), before anything is served.
    await schedules.start()
    // The reaper sleeps until the next moment due, at most a second (reaper/timer.ts). Each pass
    // also compares the clock with the moments other timers wait for, in memory: a clock that
    // jumped (or an injected one that moved) fires what came due.
    reaper = new ReaperTimer({
      clock,
      polled: clock !== systemClock,
      pass: () => {
        reap()
        clockWaiters.check()
        void schedules.check()
        dispatch.wakeIfDue()
      },
      nextDueAt: () => earliest(engine.nextDueAt(), clockWaiters.nextAt()),
    })
    reaper.start()
    undo.push(() => reaper?.stop())
    timers.push(
      setInterval(tick('the stats sampler', () => engine.sampleStats()), config.statsIntervalS * 1000),
      setInterval(
        tick('the busy sampler', reportBusy),
        BUSY_INTERVAL_MS,
      ),
    )
    pruner.start()
    // Sized after the capacity flags: a worker's slots are its share of the stored total.
    pool =
      config.workers > 0
        ? new WorkerPool({
            engine,
            dispatch,
            clockWaiters,
            readOnly: writesRefused,
            directory,
            size: config.workers,
            spawn: options.spawn ?? forkSpawner,
            log,
            workerEnv: {
              LEASEHOLD_WORKER_HANDLERS: join(config.dataDir, 'handlers'),
              LEASEHOLD_WORKER_EXEC_ALLOW: config.execAllow.join(','),
              LEASEHOLD_WORKER_WRITE_ALLOW: writeAllowVariable(config.writeAllow),
              LEASEHOLD_WORKER_CONCURRENCY: String(config.workerConcurrency ?? localWorkerSlots(engine.getCapacity().total_units, config.workers)),
              LEASEHOLD_WORKER_NICE: String(config.workerNice),
              LEASEHOLD_WORKER_STREAMS: config.workerStreams.join(','),
              LEASEHOLD_WORKER_GPU: String(config.workerGpu),
              // A result or error larger than this fails its attempt in the worker (src-worker/handler-output.ts).
              LEASEHOLD_WORKER_BODY_LIMIT: String(config.bodyLimitBytes),
            },
          })
        : null
    pool?.start()
    // The file was not closed by the last host: SQLite recovered it from its log; whether every page
    // is sound is checked on a thread, while the host serves (no start waits for a read of the whole file).
    if (uncleanShutdown) integrityCheck = backgroundIntegrityCheck(connectionPath(sqlite.name), options.nativeBinding, checkAbort.signal, log)
  }
  // The port is the host's before anything runs a job or fires a schedule: a start that cannot
  // listen (the port in use, an address this machine does not have) ends here, having run no job
  // and fired no schedule. What the steps above made stays (a first start's database, token and
  // lock, a migration, a restored backup's ids moved on): the server serves the engine, so it
  // cannot listen before the database opens. The connections it accepts wait, unread, until the
  // start is whole (connection-gate.ts).
  const gate = holdConnections(server)
  undo.push(() => gate.close())
  const address = await listen(server, config.port, config.host)
  undo.push(() => {
    server.closeAllConnections()
    front.closeAll()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  port = address.port
  const hostPart = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const url = `http://${hostPart}:${address.port}`
  // The address it listens on and the URL it publishes are its own names: what it prints works.
  const ownNames = ownHostNames(config.host, localUrl(url))
  allowedHosts = [...config.allowedHosts, ...ownNames]
  if (!LOOPBACK.has(config.host)) {
    log(`leasehold: warning: listening on ${config.host}, not only this machine; anyone who can reach it with a token that may submit jobs can run them, and so write files as the workers' user, here and on every leasehold worker's machine (file.write: --write-allow holds it to folders), and run what --exec-allow allows (requests that name it by another address or name than ${[...ownNames, 'loopback'].join(' or ')} need --allowed-host)`)
  }

  // Local commands (leasehold worker, submit, status) find the running host here. It is ours to
  // write and remove: the lock keeps every other host off this data dir.
  const hostFile = join(config.dataDir, HOST_FILE)
  undo.push(() => removeHostFile(hostFile))
  let hostFileWritten = false
  const writeOwnHostFile = () => {
    writeHostFile(hostFile, { url: localUrl(url), pid: process.pid })
    hostFileWritten = true
  }
  if (mode.state === 'read_write') writeOwnHostFile()
  else {
    try {
      writeOwnHostFile()
    } catch (error) {
      // A full disk may not hold even this small file: commands then need --url until space returns.
      log(`leasehold: ${(error as Error).message}; until space returns, other commands need --url ${localUrl(url)}`)
    }
  }

  if (mode.state === 'read_write') await startWriters()

  let stopping: Promise<void> | null = null

  // The database and its log stay the files the host opened (`files`, above). Once one is
  // deleted or replaced, the host takes no more writes and keeps what it holds where a start
  // finds it: a copy written back to the data dir, or (the log gone) the database file itself.
  let lost: FileLoss | null = null
  let kept = false
  /** The file that holds every commit of the host's once its database went: the copy the rescue wrote. */
  let keptIn: string | null = null
  let keeping = false
  const keepWhatIsHeld = async (loss: FileLoss): Promise<void> => {
    if (keeping) return
    keeping = true
    try {
      keptIn = await keepCommits(sqlite, loss, databaseFile, new Date(clock.now()))
      mode.detail = keptDetail(loss, databaseFile, keptIn)
      modeChanged()
      kept = true
      log(`leasehold: ${mode.detail}`)
      if (loss.file === 'database') {
        restoreDataDir()
        retireLostLog(keptIn) // its commits are in the copy now
      }
    } catch (error) {
      mode.detail = keptDetail(loss, databaseFile, error as Error)
      modeChanged()
      limiter.line('the rescue of the database', `leasehold: ${mode.detail}`)
    } finally {
      keeping = false
    }
  }
  // The whole data dir went with the database (`rm -rf`): what the host holds of it is written
  // back beside the rescued file, so that the restart it asks for keeps its token and the worker
  // tokens, commands find it meanwhile, and no second host starts on the data dir while it runs.
  let relock: DataDirLock | null = null
  const restoreDataDir = (): void => {
    if (existsSync(join(config.dataDir, LOCK_FILE))) return
    try {
      relock = lockDataDir(config.dataDir, options.nativeBinding)
      if (!config.token) writeTokenFile(config.dataDir, token)
      scopedTokens.restoreFile()
      writeOwnHostFile()
      log(`leasehold: the data dir ${config.dataDir} went with the database: its token, worker tokens, host.json and lock are written back`)
    } catch (error) {
      log(`leasehold: the data dir ${config.dataDir} went with the database, and what the host holds of it could not all be written back (${(error as Error).message})`)
    }
  }
  const loseFiles = (loss: FileLoss): void => {
    lost = loss
    engine.flush() // a group still open commits: its callers are told, and what they were told is kept below
    // What is kept is closed cleanly (no write follows): a start on it has nothing to warn of.
    once('the host\'s mark', 'the next start checks the kept file as after a crash', () => clearHostMark(sqlite))
    stopTakingWrites()
    mode.state = 'read_only'
    mode.reason = `database ${loss.file === 'database' ? 'file' : 'log'} ${loss.how}`
    modeChanged()
    void readThread?.stop() // no connection of the host's opens the paths again
    if (loss.how === 'cut short') {
      // Nothing whole is left to keep: the file at the path is the host's own, and what was cut off is gone from it.
      kept = true
      mode.detail = cutShortDetail(loss, databaseFile, config.dataDir)
      modeChanged()
      log(`leasehold: ${mode.detail}`)
      return
    }
    if (loss.file === 'database') setAsideLostLog()
    void keepWhatIsHeld(loss)
  }
  /** The log of the database that went, moved from its path at once: a crash before the stop must not leave it for a start to copy into the file now there. */
  const setAsideLostLog = (): void => {
    try {
      const aside = files?.setAsideLog(new Date(clock.now()))
      if (aside) log(`leasehold: moved ${databaseFile}-wal, the log of the database file that went, to ${aside}: a start would have copied it into the file now at ${databaseFile}`)
    } catch (error) {
      log(`leasehold: ${databaseFile}-wal is the log of the database file that went, and could not be moved (${(error as Error).message}): remove it before the next start, which would copy it into the file now there`)
    }
  }
  /** The log of a database that went, once the host has closed it: never left for a start to copy into the file now at the path. */
  /** `keptIn`: the file that holds the commits of the log (the copy the rescue wrote), null when none does. */
  const retireLostLog = (keptIn: string | null): void => {
    try {
      const retired = files?.retireLog(keptIn !== null, new Date(clock.now()))
      if (retired && 'removed' in retired) log(`leasehold: removed ${retired.removed}, the log of the database file that went: its commits are in the copy written to ${keptIn}`)
      if (retired && 'setAside' in retired) log(`leasehold: ${retired.setAside}, the log of the database file that went, is kept: the rescue of what the host held did not succeed`)
    } catch (error) {
      log(`leasehold: ${databaseFile}-wal is the log of the database file that went, and could not be removed (${(error as Error).message}): remove it before the next start, which would copy it into the file now there`)
    }
  }
  const fileWatch = setInterval(() => {
    if (stopping || files === null) return
    if (lost === null) {
      const loss = files.lost()
      if (loss) loseFiles(loss)
    } else if (!kept) void keepWhatIsHeld(lost)
  }, FILE_WATCH_INTERVAL_MS)
  undo.push(() => clearInterval(fileWatch))

  // Read-only: try for space every few seconds; once the database takes writes, so does the host.
  let probe: NodeJS.Timeout | null = null
  const nextProbe = probeDelays()
  const probeForSpace = () => {
    probe = setTimeout(() => {
      probe = null
      if (stopping || lost) return
      // The log at the path is the host's own after this, made or removed: the database leaves
      // the exclusive mode through a rollback journal, which removes the log, and makes a new one.
      try {
        shareDatabase(sqlite)
      } catch {
        files?.logMadeAgain()
        return probeForSpace()
      }
      files?.logMadeAgain()
      mode.state = 'read_write'
      mode.reason = null
      mode.detail = null
      modeChanged()
      resumed = true
      log(`leasehold: the disk that holds the data dir ${config.dataDir} has room again: writes resume`)
      try {
        if (!hostFileWritten) writeOwnHostFile()
      } catch (error) {
        log(`leasehold: ${(error as Error).message}`)
      }
      startWriters().catch((error: unknown) => log(`leasehold: a writer failed to start (${(error as Error).message}); it tries again on its next tick`))
    }, nextProbe())
  }
  if (mode.state === 'read_only') probeForSpace()
  undo.push(() => {
    if (probe) clearTimeout(probe)
  })

  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (probe) clearTimeout(probe)
      checkAbort.abort()
      // Every answer from now on closes its connection: a worker that asks again at once would
      // keep a kept-alive one busy, and the server's close waiting, for as long as it asks. Until
      // the server closes (after the drain) its next request opens a new connection. Before the
      // waits end just below, so that their answers close theirs too.
      closeAfterAnswers()
      // No lease from now on: the claims and file retries that wait are answered now, and later
      // ones within a second with nothing, so no long-poll holds the stop (a restart keeps the
      // running jobs' leases and the files they hold well inside their TTLs). Reports are taken
      // to the end: the drain's completions.
      dispatch.close()
      clockWaiters.close()
      // Local workers drain first: their jobs finish (or fail as retryable) while the engine is up.
      await pool?.stop(config.drainGraceS * 1000)
      await remoteWorkers?.stop() // requests read and not yet answered are read again by the next host
      clearInterval(fileWatch)
      await stopWriters()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      http.closeStreams()
      // Requests in flight finish; then every connection closes, including keep-alive ones and
      // those a client opened ahead and never sent a request on (Node counts those as busy).
      const sweepStartedAt = Date.now()
      const sweep = setInterval(() => closeConnections(sweepStartedAt), 25)
      closeConnections(sweepStartedAt)
      await closed
      clearInterval(sweep)
      if (mode.state === 'read_write') once('the last stats sample', 'the series ends at the sample before', () => engine.sampleStats()) // the last gauges before the gap in the series
      engine.flush() // a group still open commits (a no-op when the sample above committed it)
      if (mode.state === 'read_write') once('the stop\'s mark', 'the next start takes the file for one a host did not close, and checks it', () => clearHostMark(sqlite)) // the last commit: the next start finds the file closed cleanly
      await relay?.stop() // its pass in progress ends while the database is open; what waits stays in the outbox
      await readThread?.stop()
      await integrityChecksEnded() // a check in progress reads the file to its end: its thread is never cut short
      await checkpointer?.stop()
      sqlite.close() // the last connection: SQLite checkpoints the rest and removes the log
      files?.close()
      if (lost?.file === 'database') retireLostLog(keptIn)
      removeHostFile(hostFile)
      relock?.release()
      lock.release() // last: another host may start here only once this one is gone
    })())

  gate.open() // the start is whole: the connections held meanwhile are read now
  return {
    url,
    token,
    engine,
    get pool() {
      return pool
    },
    pruner,
    get integrityCheck() {
      return integrityCheck
    },
    storageMode: () => ({ ...mode }),
    stop,
  }
}

/**
 * Who this host is to the hosts that share its Redis: its database's id, so that a restart on the
 * same data dir takes its prefix back at once. A read-only start (a full disk) cannot write one
 * the first time: this process's own then, and a restart waits for the claim to expire.
 */
function ownIdentity(engine: Engine, dataDir: string): HostIdentity {
  try {
    return hostIdentity(engine.databaseId(), dataDir)
  } catch {
    return hostIdentity(randomUUID(), dataDir)
  }
}

/** The database file of a data dir. */
const databasePathOf = (config: HostConfig): string => join(config.dataDir, 'leasehold.db')

/**
 * Opens the database for a start: for reads and writes, or, when the disk is too full for that,
 * for reads only (db/open.ts `openOnFullDisk`), with `mode` set to say so. A file that cannot be
 * opened read-only either (new, or in need of a migration) refuses the start as before.
 */
function openForStart(config: HostConfig, options: HostOptions, mode: StorageMode, log: (line: string) => void): OpenedDatabase {
  const open = {
    path: databasePathOf(config),
    durability: config.durability,
    migrationsFolder: options.migrationsFolder,
    nativeBinding: options.nativeBinding,
    log,
  }
  try {
    return openDatabase(open)
  } catch (error) {
    if (!(error instanceof DatabaseOpenError) || !error.diskFull) throw error
    const opened = openOnFullDisk(open)
    mode.state = 'read_only'
    mode.reason = DISK_FULL
    mode.detail = `reads work, every write is refused until space returns on the disk that holds the data dir ${config.dataDir} (checked every few seconds; no restart needed)`
    log(
      `leasehold: the disk that holds the data dir ${config.dataDir} is full: serving reads only, and every write answers 507 storage_full ` +
        'until space returns (checked every few seconds; no restart needed)',
    )
    return opened
  }
}

/** Answers `{detail, code}` with the answer's status; the request's body is read and dropped. */
function refuseWrite(req: IncomingMessage, res: ServerResponse, answer: ErrorAnswer): void {
  req.resume()
  res.writeHead(answer.status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' })
  res.end(JSON.stringify({ detail: answer.detail, code: answer.code }))
}

/** Runs the check after an unclean shutdown and logs what it found: a line either way, what to do about damage. */
function backgroundIntegrityCheck(path: string, nativeBinding: string | undefined, signal: AbortSignal, log: (line: string) => void): Promise<IntegrityReport | null> {
  return checkIntegrityInBackground(path, { depth: 'quick', nativeBinding, signal }).then(
    (report) => {
      log(`leasehold: after an unclean shutdown, ${integrityLine(report)}`)
      return report
    },
    (error: unknown) => {
      if (!signal.aborted) log(`leasehold: the integrity check after an unclean shutdown could not run (${(error as Error).message}); \`leasehold check\` runs it`)
      return null
    },
  )
}

/**
 * How a timer's outcome is logged: a failure at most once a minute per timer (naming the disk
 * when it is a storage fault), and the next tick tries again; the first tick that works after
 * failures says so (as rate-limited, so a flapping disk cannot flood the log).
 */
function timerHealth(name: string, limiter: LogLimiter, dataDir: string): PassHealth {
  let failing = false
  return {
    ok() {
      if (!failing) return
      failing = false
      limiter.line(`${name} recovered`, `leasehold: ${name} works again`)
    },
    failed(error) {
      failing = true
      limiter.line(name, `leasehold: ${name} failed and will try again on its next tick (${failureReason(error, dataDir)})`)
    },
  }
}

/** Why a step of the host's failed, in its log: a storage fault as a client is told it, anything else with its stack. */
function failureReason(error: unknown, dataDir: string): string {
  const answer = answerError(error, dataDir)
  return answer.internal ? ((error as Error)?.stack ?? String(error)) : `${answer.code}: ${answer.detail}`
}

/** A timer's tick that never throws: see {@link timerHealth}. */
function guardedTick(name: string, run: () => void, limiter: LogLimiter, dataDir: string): () => void {
  const health = timerHealth(name, limiter, dataDir)
  return () => {
    try {
      run()
    } catch (error) {
      health.failed(error)
      return
    }
    health.ok()
  }
}

/**
 * --total-units and --busy, when given, are an operator's change that outlives the restart
 * (the flags a restart gives again change nothing: setCapacity records only a change).
 */
function applyCapacityFlags(engine: Engine, config: HostConfig): void {
  const change: { total_units?: number; busy_rating?: number | null } = {}
  if (config.totalUnits !== null) change.total_units = config.totalUnits
  if (config.busy !== null) change.busy_rating = config.busy === 'auto' ? null : config.busy
  if (Object.keys(change).length > 0) engine.setCapacity(change)
}
