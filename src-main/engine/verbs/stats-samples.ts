import type { CapacityStore } from '../memory/capacity-store'
import type { EngineContext } from '../memory/context'
import { storeRecentCounts } from '../memory/recent-counts'
import { gaugeSample, type StatsSample } from '../reads/stats'

/**
 * Writes one sample of the gauges, and the counts of the events since the last such write
 * (memory/recent-counts.ts), in one transaction; the host calls this on a timer
 * (`--stats-interval-s`).
 */
export function sampleStats(ctx: EngineContext, capacity: CapacityStore): StatsSample {
  const sample = gaugeSample(ctx, capacity)
  ctx.transact(() => {
    ctx
      .stmt(
        `INSERT OR REPLACE INTO stats_samples (ts, leases_active, jobs_queued, jobs_running, capacity_used, busy_rating)
         VALUES (@ts, @leases_active, @jobs_queued, @jobs_running, @capacity_used, @busy_rating)`,
      )
      .run(sample)
    storeRecentCounts(ctx)
  })
  return sample
}
