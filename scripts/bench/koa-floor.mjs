// The HTTP floor of `npm run bench`: a bare Koa app on loopback that reads a JSON body and
// answers {"ok":true}, with no guard, routing or engine. Started as its own process, like
// `leasehold serve`, and driven by the same client, so the two are measured on equal terms.
//
// With --pool it is also the floor under the local pickup: each POST passes its body's `i` over
// Node IPC to a child process (this file again, with --pool-worker), whose main thread posts it
// to a worker thread that notes its start on the machine's monotonic clock — a local pickup's
// path (HTTP → host → worker process → handler thread) with no engine and nothing written.
// `GET /starts` answers those moments, `{ [i]: started_ns }`.
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import Koa from 'koa'

const HANDLER_THREAD = `
const { parentPort } = require('node:worker_threads')
parentPort.on('message', (i) => parentPort.postMessage({ i, started_ns: String(process.hrtime.bigint()) }))
`

if (process.argv.includes('--pool-worker')) {
  const thread = new Worker(HANDLER_THREAD, { eval: true })
  thread.on('message', (start) => process.send(start))
  process.on('message', (i) => thread.postMessage(i))
  process.on('disconnect', () => process.exit(0))
} else {
  const pool = process.argv.includes('--pool') ? fork(fileURLToPath(import.meta.url), ['--pool-worker'], { stdio: 'inherit' }) : null
  const app = new Koa()
  if (pool) {
    const starts = {}
    pool.on('message', ({ i, started_ns }) => (starts[i] = started_ns))
    app.use(async (ctx) => {
      if (ctx.method === 'GET' && ctx.path === '/starts') {
        ctx.body = starts
        return
      }
      const chunks = []
      for await (const chunk of ctx.req) chunks.push(chunk)
      pool.send(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}').i)
      ctx.body = { ok: true }
    })
  } else {
    // The HTTP floor, exactly as every earlier sitting measured it.
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
    server.close(() => process.exit(0))
  })
}
