// The HTTP floor of `npm run bench`: a bare Koa app on loopback that reads a JSON body and
// answers {"ok":true}, with no guard, routing or engine. Started as its own process, like
// `leasehold serve`, and driven by the same client, so the two are measured on equal terms.
import Koa from 'koa'

const app = new Koa()
app.use(async (ctx) => {
  const chunks = []
  for await (const chunk of ctx.req) chunks.push(chunk)
  JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')
  ctx.body = { ok: true }
})
const server = app.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}`))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
