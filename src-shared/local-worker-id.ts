/**
 * The ids the host gives its own local workers, `local-<slot>.<generation>`, and the rule that
 * keeps them its own. Over IPC the host knows which process asks (src-main/pool/ipc-host.ts); over HTTP and
 * Redis a request names its worker itself, and one naming a local worker's id would be taken for
 * that worker: its claims shown as that worker's in `leasehold status`, its events and problems
 * recorded in its name. So a request over HTTP or Redis that names one is refused, 403
 * `worker_mismatch`, whatever its token (docs/workers.md); `leasehold worker --worker-id` refuses one at its start.
 * What any worker id must be besides is worker-id.ts's.
 */

/** The id of the local worker in pool slot `slot` (0-based), started for the `generation`th time. */
export function localWorkerId(slot: number, generation: number): string {
  return `local-${slot + 1}.${generation}`
}

const LOCAL_WORKER_ID = /^local-\d+\.\d+$/

/**
 * Whether `id` is of the form the host's local workers have ({@link localWorkerId}), reserved to
 * them — or reads as one: compared in its NFKC form, lower-cased, so that `LOCAL-1.1` and
 * `local-１.1` (a full-width digit) are not shown beside `local-1.1` as if they were it.
 */
export function isLocalWorkerId(id: string): boolean {
  return LOCAL_WORKER_ID.test(id.normalize('NFKC').toLowerCase())
}

/** Why a request over HTTP or Redis naming the local worker id `id` is refused. */
export function localWorkerIdRefused(id: string): string {
  return `Worker id ${id} is reserved to the host's own local workers (local-<slot>.<generation>): give this worker another id`
}
