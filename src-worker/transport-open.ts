import type { RemoteRoute, WorkerTransport } from './transport'

/**
 * A transport over `route` for worker `workerId`. Over Redis, `channel` names the reply stream
 * it reads, so that two transports of one worker (its runtime's and its driving thread's) each
 * read only their own answers. The clients load only when asked for: a local worker's threads
 * never load them. `log`: where the Redis transport says that Redis cannot be reached.
 */
export async function openTransport(route: RemoteRoute, workerId: string, channel?: string, log?: (line: string) => void): Promise<WorkerTransport> {
  if (route.via === 'http') return new (await import('./transport-http')).HttpTransport(route.url, route.token)
  // Over HTTP a host that does not answer fails the call, which the runtime logs; over Redis the
  // call waits for the connection, so the transport says it (`log`) itself.
  return new (await import('./transport-redis')).RedisTransport(route.url, route.token, workerId, route.prefix, channel, log)
}
