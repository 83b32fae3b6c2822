import { z } from 'zod'

/** Zod pieces shared by the dialects' request schemas. */

/** An identifier in a path or body (job, lease, attempt ids are UUIDs, but unknown ids are 404, not 400). */
export const Id = z.string().min(1).max(200)
export const WorkerId = z.string().min(1).max(200)
export const TtlSec = z.number().int().min(1).max(3600)
export const Progress = z.number().min(0).max(1)
export const Note = z.string().max(10_000)

/** Any JSON value; bounded by the body limit. */
export const JsonValue: z.ZodType<unknown> = z.unknown()

export const PRIORITY = z.enum(['LOW', 'NORMAL', 'HIGH', 'URGENT'])
