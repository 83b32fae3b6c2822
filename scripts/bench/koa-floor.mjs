// The HTTP floor of `npm run bench`: a bare Koa app on loopback that reads a JSON body and
// answers {"ok":true}, with no guard, routing or engine. Started as its own process, like
// `leasehold serve`, and driven by the same client, so the two are measured on equal terms.
//
// With --pool it is also the floor under the local pickup: each POST's body's `i` goes, as one
// line, over a Unix socket straight to a worker thread of a child process (this file again, with
// --pool-worker), which notes its start on the machine's monotonic clock — a local pickup's path
// as a job granted to a waiting local worker takes it (HTTP → host → the handler thread's own
// link, src-shared/thread-link.ts) with no engine and nothing written. The thread reports its
// starts through its process's IPC channel, after it has noted them, and this process appends
// each, `i started_ns` a line, to the file `--starts=FILE` names: read from the file, the
// moments never take the app's HTTP path, which the pickups one at a time must find as cold as
// the host's (their bench reads the host's from its database).
import { fork } from 'node:child_process'
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import Koa from 'koa'

const HANDLER_THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
const link = require('node:net').connect(workerData.path)
link.setEncoding('utf8')
let partial = ''
link.on('data', (chunk) => {
  const lines = (partial + chunk).split('\\n')
  partial = lines.pop()
  for (const i of lines) parentPort.postMessage({ i: Number(i), started_ns: String(process.hrtime.bigint()) })
})
`

if (process.argv.includes('--pool-worker')) {
  const thread = new Worker(HANDLER_THREAD, { eval: true, workerData: { path: process.argv.at(-1) } })
  thread.on('message', (start) => process.send(start))
  process.on('disconnect', () => process.exit(0))
} else {
  const folder = process.argv.includes('--pool') ? mkdtempSync(join(tmpdir(), 'koa-floor-')) : null
  const app = new Koa()
  let pool = null
  if (folder) {
    const path = join(folder, 'link.sock')
    const linked = new Promise((resolve) => createServer(resolve).listen(path))
    pool = fork(fileURLToPath(import.meta.url), ['--pool-worker', path], { stdio: 'inherit' })
    const startsFile = process.argv.find((arg) => arg.startsWith('--starts='))?.slice('--starts='.length)
    if (!startsFile) throw new Error('--pool needs --starts=FILE')
    pool.on('message', ({ i, started_ns }) => appendFileSync(startsFile, `${i} ${started_ns}\n`))
    app.use(async (ctx) => {
      const chunks = []
      for await (const chunk of ctx.req) chunks.push(chunk)
      ;(await linked).write(`${JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}').i}\n`)
      ctx.body = { ok: true }
    })
  } else {
    // The HTTP floor, exactly as the bench has always measured it.
    app.use(async (ctx) => {
      const chunks = []
      for await (const chunk of ctx.req) chunks.push(chunk)
      JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')
      ctx.body = { ok: true }
    })
  }
  const server = app.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}`))
  process.on('SIGTERM', () => {
    pool?.disconnect()
    if (folder) rmSync(folder, { recursive: true, force: true })
    server.close(() => process.exit(0))
  })
}
