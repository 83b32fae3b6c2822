/**
 * A proxy in front of a host that cuts every reused keep-alive connection: the first request on
 * a connection goes through (its Host header rewritten to the host's), any later one has its
 * connection destroyed before a byte of an answer, and never reaches the host. This is what a
 * client meets when the host closes an idle connection just as a request leaves on it. With
 * `cut: false` it passes every request, and only records the host's answers. `before` runs ahead
 * of each request it passes, and the request waits for it: a test drives the host between two
 * requests of one command. `beforeAnswer` runs when the host's answer comes, and the answer waits
 * for it before it goes on to the client: a host that acts at once and answers late.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface CuttingProxy {
  url: string
  /** Requests cut so far (each on a reused connection). */
  cuts(): number
  /** Requests passed to the host so far. */
  passed(): number
  /** The status of each answer the host gave, in the order given. */
  statuses(): number[]
  /** Each request passed to the host, in the order it came: its path, and its Authorization header if it had one. */
  requests(): { path: string; authorization?: string }[]
  close(): Promise<void>
}

export interface ProxyOptions {
  cut?: boolean
  before?: (method: string, path: string) => Promise<void> | void
  beforeAnswer?: (method: string, path: string) => Promise<void> | void
}

export async function cuttingProxy(target: string, { cut = true, before, beforeAnswer }: ProxyOptions = {}): Promise<CuttingProxy> {
  const upstream = new URL(target)
  const served = new WeakSet<object>()
  let cuts = 0
  let passed = 0
  const statuses: number[] = []
  const requests: { path: string; authorization?: string }[] = []
  const server = http.createServer(async (req, res) => {
    if (cut && served.has(req.socket)) {
      cuts += 1
      req.socket.destroy()
      return
    }
    served.add(req.socket)
    passed += 1
    requests.push({ path: req.url ?? '', ...(req.headers.authorization === undefined ? {} : { authorization: req.headers.authorization }) })
    await before?.(req.method ?? 'GET', req.url ?? '')
    const forward = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host }, agent: false },
      async (answer) => {
        await beforeAnswer?.(req.method ?? 'GET', req.url ?? '')
        // Hop-by-hop headers are the proxy's own: its connection to the client stays open.
        const { connection: _c, 'keep-alive': _k, ...headers } = answer.headers
        statuses.push(answer.statusCode ?? 502)
        res.writeHead(answer.statusCode ?? 502, headers)
        answer.pipe(res)
      },
    )
    forward.on('error', () => res.destroy())
    req.pipe(forward)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    cuts: () => cuts,
    passed: () => passed,
    statuses: () => [...statuses],
    requests: () => [...requests],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
