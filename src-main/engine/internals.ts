import type { EngineContext } from './memory/context'
import type { Engine } from './index'

/**
 * The engine's context behind its facade: for the engine's own white-box tests and the
 * benchmarks, which read the database and open transactions directly. No module of the host
 * imports this (test/unit/boundary.test.ts holds src-main to it): the host speaks to the engine
 * through the facade's verbs and domain types only.
 */
export function engineContext(engine: Engine): EngineContext {
  // `ctx` is private to the facade; an index access is TypeScript's sanctioned way past that.
  return engine['ctx']
}
