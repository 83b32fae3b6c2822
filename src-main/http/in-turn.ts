import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

type Listener = (req: IncomingMessage, res: ServerResponse) => void

/** Per connection, the requests that wait for their turn ({@link servedInTurn}). */
const waiting = new WeakMap<Socket, number>()

/**
 * Runs `listener` for each request only once its answer may be written: the first on its
 * connection, or when the answers before it have gone (Node then gives its response the socket,
 * `socket` event). While a request waits, nothing more is read from its connection.
 *
 * Node's server runs every request it parses at once, and queues the answers of those sent ahead
 * (pipelined) in memory until their turn; it stops reading a connection only once what is queued
 * passes the socket's high-water mark, and only after the whole read in hand is parsed, and each
 * answer that ends resumes the reading. A read holds a thousand small GETs, so a client that sent
 * them ahead and read nothing had each of them run and its whole answer (a script of the
 * dashboard, the API's document) held: a gigabyte for a few seconds of sending, without a token.
 * In turn, a connection holds one answer being written and the requests of the read in hand, as
 * the front's connections do (front.ts).
 */
export function servedInTurn(listener: Listener): Listener {
  return (req, res) => {
    if (res.socket !== null) return listener(req, res)
    const socket = req.socket
    const count = waiting.get(socket)
    // Node resumes the connection as each answer ends (the request behind it is read to its end):
    // while a request waits, it is paused again at once.
    if (count === undefined) socket.on('resume', () => void ((waiting.get(socket) ?? 0) > 0 && socket.pause()))
    waiting.set(socket, (count ?? 0) + 1)
    socket.pause()
    res.once('socket', () => {
      const left = waiting.get(socket)! - 1
      waiting.set(socket, left)
      // (Node pauses a connection of its own accord too, its answers not drained, and resumes it itself.)
      if (left === 0 && !(socket as Socket & { _paused?: boolean })._paused) socket.resume()
      listener(req, res)
    })
  }
}
