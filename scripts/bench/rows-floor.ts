// The rows floor of `npm run bench`: what a job submitted one request each costs with no engine at
// all. A bare server that, for each POST, writes the rows the host writes for such a job when a
// worker waits for it — the job inserted as leased, its lease, its JOB_SUBMITTED and
// LEASE_GRANTED events — and, for the job a worker finished, the job's and the lease's update and
// its JOB_DONE event: plain prepared statements in the host's own database (its schema and
// pragmas, src-main/db/open.ts), one `BEGIN IMMEDIATE … COMMIT` an event-loop turn, as the host's
// group commit. After the commit it hands the turn's jobs to a worker process in one JSON line
// over a Unix socket, as the host hands them to a local worker's driving thread, and answers each
// request 201 with its job; the worker answers each hand-off with the jobs' completions, which
// commit with the next turn's submits (or alone 2 ms later, as the host's do). No validation,
// guard, routing, memory of the queues, dispatch or event stream: the floor under the
// single-submit rows, started as its own process like `leasehold serve` and driven by the same
// client loops. Started with `node --import tsx`, it prints `listening on URL` and stops on
// SIGTERM.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase } from '../../src-main/db/open'
import { keyedId, newToken } from '../../src-main/engine/store/ids'

/** The worker: each line of grants is answered with their completions, as a no-op job's handler would. */
const WORKER = `
const link = require('node:net').connect(process.argv[1])
link.setEncoding('utf8')
let partial = ''
link.on('data', (chunk) => {
  const lines = (partial + chunk).split('\\n')
  partial = lines.pop()
  for (const line of lines) {
    const completed = JSON.parse(line).granted.map((g) => ({ lease_id: g.lease_id, token: g.token, result: null }))
    link.write(JSON.stringify({ completed }) + '\\n')
  }
})
link.on('close', () => process.exit(0))
`

const WORKER_ID = 'local-1.1'
const LEASE_TTL_MS = 35_000
/** A completion no submit comes to carry commits alone after this long, as the host's `groupWaitMs`. */
const LONE_COMPLETION_MS = 2

const folder = mkdtempSync(join(tmpdir(), 'leasehold-rows-floor-'))
const { sqlite: db } = openDatabase({ path: join(folder, 'leasehold.db') })

const JOB_COLUMNS = [
  'seq', 'id', 'addon_id', 'job_type', 'priority', 'cost_units', 'constraints', 'payload', 'is_unique', 'idempotency_key',
  'tags', 'max_runtime_s', 'queue', 'max_attempts', 'state', 'attempts', 'claimed_by', 'claim_expires_at', 'lease_id',
  'next_retry_at', 'eligible_at', 'cancel_requested', 'progress', 'note', 'dead_letter', 'final_status', 'error', 'result',
  'metrics', 'created_at', 'updated_at', 'started_at', 'finished_at', 'stream_message_id', 'last_event_id',
]
const statements = {
  begin: db.prepare('BEGIN IMMEDIATE'),
  commit: db.prepare('COMMIT'),
  insertJob: db.prepare(`INSERT INTO jobs (${JOB_COLUMNS.join(', ')}) VALUES (${JOB_COLUMNS.map(() => '?').join(', ')})`),
  insertLease: db.prepare(
    `INSERT INTO leases (fence, id, job_id, attempt_id, worker_id, cost_units, ttl_s, grace_s, state, token, granted_at, last_heartbeat_at, expires_at, attempt)
     VALUES (?, ?, ?, ?, '${WORKER_ID}', ?, 30, 5, 'ACTIVE', ?, ?, ?, ?, 1)`,
  ),
  insertEvent: db.prepare('INSERT INTO events (id, ts, entity_type, entity_id, job_id, event_type, data, prev_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),
  finishJob: db.prepare(
    "UPDATE jobs SET state = 'DONE', claimed_by = NULL, claim_expires_at = NULL, progress = 1, final_status = 'SUCCEEDED', result = ?, updated_at = ?, finished_at = ?, last_event_id = ? WHERE seq = ?",
  ),
  endLease: db.prepare("UPDATE leases SET state = 'RELEASED', released_at = ?, release_status = 'SUCCEEDED', disposition = 'FINAL' WHERE fence = ?"),
}

/** A job handed to the worker, as its completion will need it. */
interface Leased {
  seq: number
  fence: number
  id: string
  lastEventId: number
}

let nextSeq = 1
let nextFence = 1
let nextEventId = 1
const leased = new Map<string, Leased>()
/** Completions read from the worker, written by the next transaction. */
let completions: Leased[] = []
/** The turn's transaction is open; at the turn's end it commits, then the hand-off and the answers go. */
let open = false
let handOff: unknown[] = []
let answers: (() => void)[] = []
let loneTimer: NodeJS.Timeout | null = null
let worker: Socket | null = null

function writeCompletions(now: number): void {
  for (const job of completions) {
    const eventId = nextEventId++
    statements.insertEvent.run(eventId, now, 'JOB', job.id, job.id, 'JOB_DONE', JSON.stringify({ state: 'DONE', attempt: 1, dead_letter: false }), job.lastEventId)
    statements.finishJob.run('null', now, now, eventId, job.seq)
    statements.endLease.run(now, job.fence)
  }
  completions = []
}

function openTransaction(): void {
  if (open) return
  if (loneTimer) clearTimeout(loneTimer)
  loneTimer = null
  statements.begin.run()
  open = true
  setImmediate(commitTurn)
  writeCompletions(Date.now())
}

function commitTurn(): void {
  statements.commit.run()
  open = false
  if (handOff.length > 0) worker?.write(`${JSON.stringify({ granted: handOff })}\n`)
  handOff = []
  const answering = answers
  answers = []
  for (const answer of answering) answer()
}

function submit(input: { job_type: string; cost_units: number }, answer: (job: object) => void): void {
  openTransaction()
  const now = Date.now()
  const seq = nextSeq++
  const fence = nextFence++
  const id = keyedId(seq)
  const leaseId = keyedId(fence)
  const token = newToken()
  const submitted = nextEventId++
  const granted = nextEventId++
  const expiresAt = now + LEASE_TTL_MS
  statements.insertJob.run(
    seq, id, null, input.job_type, 2, input.cost_units, '{}', '{}', 0, null,
    '[]', null, 'default', 3, 'LEASED', 1, WORKER_ID, expiresAt, leaseId,
    null, now, 0, null, null, 0, null, null, null,
    null, now, now, now, null, seq, granted,
  )
  statements.insertLease.run(fence, leaseId, id, keyedId(fence), input.cost_units, token, now, now, expiresAt)
  statements.insertEvent.run(submitted, now, 'JOB', id, id, 'JOB_SUBMITTED', JSON.stringify({ state: 'QUEUED', job_type: input.job_type, priority: 'NORMAL', cost_units: input.cost_units, queue: 'default' }), 0)
  statements.insertEvent.run(granted, now, 'LEASE', leaseId, id, 'LEASE_GRANTED', JSON.stringify({ state: 'RUNNING', worker_id: WORKER_ID, cost_units: input.cost_units, attempt: 1, fence, expires_at: expiresAt }), submitted)
  leased.set(leaseId, { seq, fence, id, lastEventId: granted })
  handOff.push({ lease_id: leaseId, token, job_id: id, job_type: input.job_type, payload: {}, attempt: 1, expires_at: expiresAt })
  const at = new Date(now).toISOString()
  answers.push(() =>
    answer({ id, state: 'LEASED', job_type: input.job_type, priority: 'NORMAL', cost_units: input.cost_units, queue: 'default', attempts: 1, max_attempts: 3, lease_id: leaseId, claimed_by: WORKER_ID, payload: {}, tags: [], created_at: at, updated_at: at }),
  )
}

function completed(leaseIds: string[]): void {
  for (const leaseId of leaseIds) {
    const job = leased.get(leaseId)
    if (!job) continue
    leased.delete(leaseId)
    completions.push(job)
  }
  if (open) return writeCompletions(Date.now())
  loneTimer ??= setTimeout(() => {
    loneTimer = null
    if (completions.length > 0) openTransaction()
  }, LONE_COMPLETION_MS)
}

const socketPath = join(folder, 'worker.sock')
let linked: () => void
const workerLinked = new Promise<void>((resolve) => (linked = resolve))
const link = createServer((socket) => {
  worker = socket
  linked()
  socket.setEncoding('utf8')
  let partial = ''
  socket.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n')
    partial = lines.pop()!
    for (const line of lines) completed((JSON.parse(line) as { completed: { lease_id: string }[] }).completed.map((c) => c.lease_id))
  })
})
await new Promise<void>((resolve) => link.listen(socketPath, resolve))
const workerProcess = spawn(process.execPath, ['-e', WORKER, socketPath], { stdio: 'ignore' })
await workerLinked // no job is handed off before the worker is there to take it

const HEAD_END = Buffer.from('\r\n\r\n')

/** One connection's requests, each framed by its Content-Length, answered in order. */
function serve(socket: Socket): void {
  socket.setNoDelay(true)
  let buffered: Buffer = Buffer.alloc(0)
  socket.on('error', () => socket.destroy())
  socket.on('data', (chunk: Buffer) => {
    buffered = buffered.length > 0 ? Buffer.concat([buffered, chunk]) : chunk
    for (;;) {
      const headEnd = buffered.indexOf(HEAD_END)
      if (headEnd < 0) return
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buffered.toString('latin1', 0, headEnd))?.[1] ?? 0)
      const bodyStart = headEnd + HEAD_END.length
      if (buffered.length < bodyStart + length) return
      const input = JSON.parse(buffered.toString('utf8', bodyStart, bodyStart + length)) as { job_type: string; cost_units?: number }
      buffered = buffered.subarray(bodyStart + length)
      submit({ job_type: input.job_type, cost_units: input.cost_units ?? 1 }, (job) => {
        const text = JSON.stringify(job)
        socket.write(`HTTP/1.1 201 Created\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nDate: ${new Date().toUTCString()}\r\nConnection: keep-alive\r\n\r\n${text}`)
      })
    }
  })
}

const server = createServer(serve).listen(0, '127.0.0.1', () => {
  const address = server.address() as { port: number }
  console.log(`listening on http://127.0.0.1:${address.port}`)
})

process.on('SIGTERM', () => {
  workerProcess.kill()
  server.close()
  link.close()
  db.close()
  rmSync(folder, { recursive: true, force: true })
  process.exit(0)
})
