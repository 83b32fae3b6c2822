import type { Server } from 'node:http'
import type { Socket } from 'node:net'

/** The connections a starting host accepted and reads nothing from yet. */
export interface ConnectionGate {
  /** Hands the connections held so far to the server's own listener, and every later one at once. */
  open(): void
  /** Closes the connections held: the start failed. */
  close(): void
}

/**
 * Holds the connections `server` accepts until `open()`. A host listens, and so owns its port,
 * before it starts anything that runs jobs or fires schedules; until its start is whole it reads
 * no request: what a client sends meanwhile waits in its socket's buffer. Call it once the
 * server's connection listeners are attached (http/front.ts).
 */
export function holdConnections(server: Server): ConnectionGate {
  const listeners = server.listeners('connection') as ((socket: Socket) => void)[]
  server.removeAllListeners('connection')
  let held: Socket[] | null = []
  const serve = (socket: Socket) => {
    for (const listener of listeners) listener.call(server, socket)
  }
  server.on('connection', (socket: Socket) => (held ? held.push(socket) : serve(socket)))
  return {
    open: () => {
      const waiting = held ?? []
      held = null
      for (const socket of waiting) if (!socket.destroyed) serve(socket)
    },
    close: () => {
      for (const socket of held ?? []) socket.destroy()
      held = null
    },
  }
}
