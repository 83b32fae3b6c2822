/** What the crash driver and the crash test share: the engine settings and the acknowledgement lines. */
import type { CapacitySettings } from '../../src-main/engine/rules/capacity'
import type { EngineConfig } from '../../src-main/engine'

/** Short leases, so a lease granted before a crash comes due within the test. */
export const DRIVER_CONFIG: Partial<EngineConfig> = {
  leaseTtlS: 2,
  heartbeatGraceS: 1,
  minTtlS: 1,
  backoff: { baseMs: 100, maxMs: 1_000 },
}

export const DRIVER_CAPACITY: CapacitySettings = { total_units: 20, busy_rating: 0 }

/** One stdout line of the driver, written after the operation it reports has committed. */
export type Ack =
  | { op: 'ready'; pid: number }
  | { op: 'submit'; job_id: string }
  | { op: 'grant'; lease_id: string; job_id: string; expires_at: number }
  | { op: 'heartbeat'; lease_id: string; expires_at: number }
  | { op: 'complete'; job_id: string; lease_id: string }
  | { op: 'fail'; job_id: string; lease_id: string }
