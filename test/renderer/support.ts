import { flushSync, mount, unmount } from 'svelte'
import type { Job, LogEvent } from '../../src-renderer/lib/api'

export const T0 = Date.UTC(2026, 0, 1)
export const SECOND = 1000
export const iso = (ms: number) => new Date(ms).toISOString()

let nextId = 1
/** An event as the SSE stream carries it. */
export function event(type: LogEvent['type'], fields: Partial<LogEvent> & { data?: Record<string, unknown> } = {}): LogEvent {
  return { id: nextId++, ts: iso(T0), type, entity_type: 'JOB', entity_id: fields.job_id ?? 'job-1', job_id: 'job-1', data: {}, ...fields }
}

export function job(overrides: Partial<Job> = {}): Job {
  return {
    job_id: 'job-1',
    addon_id: null,
    job_type: 'sleep',
    priority: 'NORMAL',
    cost_units: 10,
    constraints: {},
    payload: {},
    state: 'QUEUED',
    created_at: iso(T0),
    updated_at: iso(T0),
    claimed_by: null,
    claim_expires_at: null,
    lease_id: null,
    attempts: 0,
    max_attempts: 3,
    next_retry_at: null,
    run_at: null,
    unique: false,
    tags: [],
    max_runtime_s: null,
    queue: 'default',
    client_request_id: null,
    cancel_requested: false,
    progress: null,
    note: null,
    dead_letter: false,
    ...overrides,
  }
}

/** A fetch that answers from a table of `METHOD path` → body (or a status with a body). */
export function fakeFetch(routes: Record<string, object | ((body: any) => unknown)>) {
  const calls: { method: string; path: string; body: unknown; headers: Record<string, string> }[] = []
  const fetcher = async (request: Request): Promise<Response> => {
    const { method } = request
    const url = new URL(request.url)
    const path = url.pathname + url.search
    const text = await request.text()
    const body = text === '' ? undefined : JSON.parse(text)
    // By their lower-case names, as fetch gives them (happy-dom keeps the case they were set in).
    calls.push({ method, path, body, headers: Object.fromEntries([...request.headers].map(([name, value]) => [name.toLowerCase(), value])) })
    const route = routes[`${method} ${path}`] ?? routes[`${method} ${url.pathname}`]
    if (route === undefined) return new Response(JSON.stringify({ code: 'not_found', detail: `no ${method} ${path}` }), { status: 404 })
    const answer: unknown = await (typeof route === 'function' ? (route as (body: unknown) => unknown)(body) : route)
    if (answer instanceof Response) return answer
    return new Response(JSON.stringify(answer), { status: 200, headers: { 'content-type': 'application/json' } })
  }
  return { fetcher, calls }
}

const mounted: ReturnType<typeof mount>[] = []

/** Mounts a component in the document (happy-dom); {@link unmountAll} after each test takes it away. */
export function render<P extends Record<string, any>>(component: any, props: P): HTMLElement {
  const target = document.createElement('div')
  document.body.append(target)
  mounted.push(mount(component, { target, props }))
  flushSync()
  return target
}

export function unmountAll(): void {
  for (const component of mounted.splice(0)) unmount(component)
  document.body.innerHTML = ''
}

/**
 * Types into a field as its successive values, key by key (`'1', '15', '150'`; `'10', '1', ''`
 * backspaces), each an input event as the browser sends it.
 */
export function typeText(field: HTMLInputElement | HTMLTextAreaElement, ...values: string[]): void {
  for (const value of values) {
    field.value = value
    field.dispatchEvent(new Event('input', { bubbles: true }))
    flushSync()
  }
}

/** An element's text with its white space folded. */
export const text = (el: Element | null | undefined) => el?.textContent?.replace(/\s+/g, ' ').trim()
