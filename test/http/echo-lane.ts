/**
 * A lane (src-main/http/lane.ts) of one stub route, `POST /internal/worker/echo`, for the tests
 * of the lane and of the front: by default it echoes the body's `say`; a test may set what it does.
 */
import { z } from 'zod'
import { errorReplies } from '../../src-main/http/errors'
import { createLane, type Lane } from '../../src-main/http/lane'
import { route, type RouteCall, type RouteDeps } from '../../src-main/http/route'
import { WORKER_PREFIX } from '../../src-main/http/worker-api'
import { LogLimiter } from '../../src-shared/log-limiter'

export const ECHO_PATH = `${WORKER_PREFIX}/echo`
const Echo = z.strictObject({ worker_id: z.string().optional(), say: z.string().optional() })
type Behaviour = (input: z.infer<typeof Echo>, call: RouteCall<unknown>) => Promise<unknown>
const ECHO: Behaviour = async (input) => ({ heard: input.say ?? null })

export interface EchoLane {
  lane: Lane
  /** What the lines the lane's errors logged. */
  logged: string[]
  /** Sets what the route does, until {@link reset}. */
  behave(behaviour: Behaviour): void
  /** Back to echoing, with nothing logged. */
  reset(): void
  /**
   * Makes the route wait for its client to hang up: `waiting` resolves once a call waits, and
   * `aborted` once its `clientGone` signal aborts.
   */
  waitForHangUp(): { waiting: Promise<void>; aborted: Promise<boolean> }
}

/** The lane, guarded by `token` on the port `port()` names, taking bodies of at most `limit` bytes. */
export function echoLane(token: string, limit: number, port: () => number): EchoLane {
  let behaviour = ECHO
  const logged: string[] = []
  const echo = route({
    method: 'POST',
    path: '/echo',
    id: 'echo',
    summary: 'Echoes',
    body: Echo,
    answer: z.unknown(),
    lane: true,
    grouped: false,
    run: ({ body }, _, call) => behaviour(body, call),
  })
  const log = (line: string) => logged.push(line)
  const lane = createLane([{ tag: 'worker', description: '', prefix: WORKER_PREFIX, routes: [echo] }], {
    routes: null as unknown as RouteDeps, // the stub route uses none
    policy: {
      token,
      allowedHosts: [],
      get port() {
        return port()
      },
    },
    bodyLimitBytes: limit,
    errors: errorReplies(log, new LogLimiter(log, Date.now), () => '/data'),
  })
  return {
    lane,
    logged,
    behave: (next) => void (behaviour = next),
    reset: () => {
      behaviour = ECHO
      logged.length = 0
    },
    waitForHangUp: () => {
      let started!: () => void
      let gone!: (aborted: boolean) => void
      const waiting = new Promise<void>((resolve) => (started = resolve))
      const aborted = new Promise<boolean>((resolve) => (gone = resolve))
      behaviour = async (_, call) => {
        call.clientGone().addEventListener('abort', () => gone(true))
        started()
        await aborted
        return { gone: true }
      }
      return { waiting, aborted }
    },
  }
}
