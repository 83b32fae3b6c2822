import { describeError, METRICS, type ApiClient, type Bucket, type Metric, type Range, type Timeseries } from './api'

/** How many points a range holds in a bucket size, e.g. 24h in 5m = 288. */
const MINUTES: Record<Range | Bucket, number> = { '1m': 1, '5m': 5, '15m': 15, '1h': 60, '6h': 360, '24h': 1440, '7d': 10080 }
export const pointCount = (range: Range, bucket: Bucket): number => Math.ceil(MINUTES[range] / MINUTES[bucket])

/** A series as a chart draws it: bucket starts in seconds (uPlot's unit) and values. */
export interface ChartSeries {
  xs: number[]
  /** Null where nothing is drawn: a gap, not a zero. */
  ys: (number | null)[]
}

/**
 * What a chart draws of a series: every bucket of the range on the time axis, but no value for
 * the buckets that ended before the host's history began (`since`). The host answers 0 for those
 * as for any empty bucket, and a line of zeros would claim that nothing ran then, when nothing
 * was there to run it. Before any history at all (`since` null), nothing is drawn.
 */
export function chartSeries(series: Timeseries | undefined): ChartSeries {
  const points = series?.points ?? []
  const bucketMs = series ? MINUTES[series.bucket] * 60_000 : 0
  const since = series?.since ? Date.parse(series.since) : null
  return {
    xs: points.map((p) => Date.parse(p.ts) / 1000),
    ys: points.map((p) => (since !== null && Date.parse(p.ts) + bucketMs > since ? p.value : null)),
  }
}

/** The time series of GET /api/scheduler/stats/timeseries, one per metric, for one range and bucket. */
export class ChartsState {
  range = $state<Range>('1h')
  bucket = $state<Bucket>('1m')
  series = $state<Partial<Record<Metric, Timeseries>>>({})
  error = $state<string | null>(null)
  loading = $state(false)
  private generation = 0

  constructor(private readonly api: ApiClient) {}

  async refresh(): Promise<void> {
    const generation = ++this.generation
    this.loading = true
    const { range, bucket } = this
    try {
      const all = await Promise.all(METRICS.map((m) => this.api.timeseries(m, range, bucket)))
      if (generation !== this.generation) return
      this.series = Object.fromEntries(all.map((s) => [s.metric, s]))
      this.error = null
    } catch (error) {
      if (generation === this.generation) this.error = describeError(error)
    } finally {
      if (generation === this.generation) this.loading = false
    }
  }

  select(change: { range?: Range; bucket?: Bucket }): Promise<void> {
    if (change.range) this.range = change.range
    if (change.bucket) this.bucket = change.bucket
    return this.refresh()
  }
}
