/**
 * The dashboard's views, addressed by the URL fragment: `#/jobs`, `#/jobs/<id>`, `#/schedules`,
 * `#/queues`, `#/blockers` … A view's own settings follow a `?` (the Jobs view's filter:
 * `#/jobs?state=FAILED&type=sleep`), so that a reload or a link shows the same.
 */
export const VIEWS = ['overview', 'jobs', 'schedules', 'queues', 'blockers', 'workers', 'charts'] as const
export type View = (typeof VIEWS)[number] | 'job'

export interface Place {
  view: View
  /** The job of the `job` view. */
  jobId: string | null
  /** The `job` view's id is the fragment's text as it stands: it is not a well-formed URI escape (`%FF`), so it names no job. */
  malformed?: true
  /** The view's settings after the `?`, when the fragment has any. */
  query?: URLSearchParams
}

export function parseRoute(hash: string): Place {
  const [path = '', query] = hash.replace(/^#\/?/, '').split('?', 2)
  const parts = path.split('/').filter(Boolean)
  if (parts[0] === 'jobs' && parts[1]) {
    // A typed or cut address may hold a broken escape: it names no job, and must not stop the page following the address.
    const jobId = decoded(parts[1])
    return jobId === null ? { view: 'job', jobId: parts[1], malformed: true } : { view: 'job', jobId }
  }
  const view = VIEWS.find((v) => v === parts[0])
  const place: Place = { view: view ?? 'overview', jobId: null }
  return query ? { ...place, query: new URLSearchParams(query) } : place
}

/** A fragment's part decoded, or null when it is not a well-formed URI escape. */
function decoded(part: string): string | null {
  try {
    return decodeURIComponent(part)
  } catch {
    return null
  }
}

export function hrefOf(place: Place): string {
  if (place.view === 'job' && place.jobId) return `#/jobs/${encodeURIComponent(place.jobId)}`
  const query = place.query?.toString()
  return query ? `#/${place.view}?${query}` : `#/${place.view}`
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
