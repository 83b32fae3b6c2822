import type { Handler } from '../handler-api'

/**
 * `noop`: reports progress once and returns. The smallest real job: for benchmarks (the peer's
 * job does one `updateProgress`) and for trying a host out.
 */
export const noop: Handler = {
  type: 'noop',
  async run({ progress }) {
    progress(0.5)
    return null
  },
}
