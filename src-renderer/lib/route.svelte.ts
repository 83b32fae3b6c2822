/** The dashboard's views, addressed by the URL fragment: `#/jobs`, `#/jobs/<id>`, `#/schedules`, `#/queues`, `#/blockers` … */
export const VIEWS = ['overview', 'jobs', 'schedules', 'queues', 'blockers', 'workers', 'charts'] as const
export type View = (typeof VIEWS)[number] | 'job'

export interface Place {
  view: View
  /** The job of the `job` view. */
  jobId: string | null
}

export function parseRoute(hash: string): Place {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent)
  if (parts[0] === 'jobs' && parts[1]) return { view: 'job', jobId: parts[1] }
  const view = VIEWS.find((v) => v === parts[0])
  return { view: view ?? 'overview', jobId: null }
}

export function hrefOf(place: Place): string {
  return place.view === 'job' && place.jobId ? `#/jobs/${encodeURIComponent(place.jobId)}` : `#/${place.view}`
}

/** Where the page is; follows the fragment (back and forward included). */
export class Route {
  place = $state<Place>(parseRoute(location.hash))
  private readonly listeners = new Set<(place: Place) => void>()

  constructor() {
    window.addEventListener('hashchange', () => {
      this.place = parseRoute(location.hash)
      for (const listener of this.listeners) listener(this.place)
    })
  }

  onChange(listener: (place: Place) => void): void {
    this.listeners.add(listener)
  }
}
