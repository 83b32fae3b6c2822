import { getPriority, setPriority } from 'node:os'

/**
 * Lowers the calling thread's scheduling priority to niceness `nice`, never raising it: a thread
 * already nicer than that (its host was started with `nice -n 15`, say) stays as it is. Returns
 * why it could not (the thread then runs as it is), or null.
 *
 * On Linux niceness is each thread's, and a thread or program started from this one takes it;
 * on macOS and Windows it is the process's (there, niceness 10–18 is the below-normal priority
 * class and 19 the idle one).
 */
export function lowerPriority(nice: number): string | null {
  try {
    if (getPriority() < nice) setPriority(nice)
    return null
  } catch (error) {
    return `could not lower its priority to niceness ${nice}: ${(error as Error).message}`
  }
}
