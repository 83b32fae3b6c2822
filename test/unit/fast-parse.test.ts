/**
 * safeParseFast (src-shared/fast-parse.ts): zod's safeParse, with a predicate compiled from the
 * schema that lets through, unchanged, the values zod would hand back unchanged. zod is the
 * oracle here: whatever the predicate accepts, zod accepts and returns equal; whatever zod
 * returns unchanged, the predicate accepts (so the hot paths never pay for zod); a schema the
 * predicate does not cover is zod's alone.
 */
import { isDeepStrictEqual } from 'node:util'
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { z } from 'zod'
import { compiledCheck, safeParseFast } from '../../src-shared/fast-parse'
import { FromHost, FromWorker, IPC_METHODS } from '../../src-shared/ipc-protocol'
import { SubmitJob } from '../../src-main/http/queue-api'
import { WorkerExchange } from '../../src-shared/worker-exchange'
import { BODY_ROUTES } from '../http/routes'

type Def = {
  type: string
  shape?: Record<string, z.ZodType>
  element?: z.ZodType
  keyType?: z.ZodType
  valueType?: z.ZodType
  options?: z.ZodType[]
  innerType?: z.ZodType
  entries?: Record<string, unknown>
  values?: unknown[]
  checks?: { _zod: { def: { check: string; minimum?: number; maximum?: number; value?: number } } }[]
}
const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: Def } })._zod.def

/** Bounds a schema's checks name, and the numbers either side of them. */
function nearBounds(def: Def): number[] {
  const bounds = (def.checks ?? []).flatMap(({ _zod: { def: check } }) => [check.minimum, check.maximum, check.value].filter((n): n is number => typeof n === 'number'))
  return bounds.flatMap((n) => [n - 1, n, n + 1]).filter((n) => n >= 0 && n <= 300)
}

/**
 * Values shaped like `schema` — most of them valid, some with one part wrong (a value of
 * another type, a string one past its bound, a key the schema does not have, `__proto__`) —
 * the way clients and workers send them: JSON, sometimes bent.
 */
function shaped(schema: z.ZodType, depth = 0): fc.Arbitrary<unknown> {
  const def = defOf(schema)
  const wrong = fc.oneof(fc.jsonValue({ maxDepth: 1 }), fc.constantFrom(undefined, Number.NaN, Number.POSITIVE_INFINITY, -0, 1.5, [], {}))
  const lengths = nearBounds(def)
  const right = ((): fc.Arbitrary<unknown> => {
    switch (def.type) {
      case 'string':
        return fc.oneof(
          { arbitrary: fc.string({ maxLength: 12 }), weight: 1 },
          { arbitrary: fc.constantFrom('', 'noop', 'default', '\u0000', '\ud800', 'x\tz', '2026-02-06T20:15:30.123Z', '2026-02-06T20:15:30+01:00', '2026-02-06', '/tmp/a', 'C:\\a', '0 2 * * *', 'UTC'), weight: 3 },
          ...(lengths.length > 0 ? [{ arbitrary: fc.constantFrom(...lengths).map((n) => 'a'.repeat(n)), weight: 1 }] : []),
        )
      case 'number':
        return fc.oneof(fc.integer({ min: -3, max: 300 }), fc.double({ noNaN: false }), ...(lengths.length > 0 ? [fc.constantFrom(...lengths)] : []))
      case 'boolean':
        return fc.boolean()
      case 'null':
        return fc.constant(null)
      case 'enum':
        return fc.constantFrom(...Object.values(def.entries ?? {}), 'OTHER')
      case 'literal':
        return fc.constantFrom(...(def.values ?? []), 'other')
      case 'optional':
        return fc.oneof(fc.constant(undefined), shaped(def.innerType!, depth))
      case 'nullable':
        return fc.oneof(fc.constant(null), shaped(def.innerType!, depth))
      case 'array':
        return depth > 3 ? fc.constant([]) : fc.array(shaped(def.element!, depth + 1), { maxLength: 3 })
      case 'record':
        return fc.dictionary(fc.oneof(fc.string({ maxLength: 4 }), fc.constant('k'.repeat(101))), shaped(def.valueType!, depth + 1), { maxKeys: 3 })
      case 'union':
        return fc.oneof(...def.options!.map((option) => shaped(option, depth)))
      case 'object': {
        const fields = Object.entries(def.shape ?? {})
        const shape = Object.fromEntries(fields.map(([key, field]) => [key, shaped(field, depth + 1)]))
        const required = fields.filter(([, field]) => (field as unknown as { _zod: { optin?: string } })._zod.optin === undefined).map(([key]) => key)
        // The optional keys come or not; now and then a required one is missing, or a key the schema does not have is added.
        const rarely = <T,>(arbitrary: fc.Arbitrary<T>) => fc.oneof({ arbitrary: fc.constant(null), weight: 7 }, { arbitrary, weight: 1 })
        const missing = rarely(fc.constantFrom(...required, 'none'))
        const extra = rarely(fc.constantFrom('extra', '__proto__', 'toString'))
        return fc.tuple(fc.record(shape, { requiredKeys: required }), missing, extra, wrong).map(([record, drop, add, value]) => {
          const out: Record<string, unknown> = { ...record }
          if (drop !== null) delete out[drop]
          if (add !== null) Object.defineProperty(out, add, { value, enumerable: true, writable: true, configurable: true })
          return out
        })
      }
      default:
        return fc.jsonValue({ maxDepth: 2 })
    }
  })()
  return fc.oneof({ arbitrary: right, weight: 12 }, { arbitrary: wrong, weight: 1 })
}

/** Every schema the host and its workers validate on their way: the routes' bodies, the workers' messages. */
const SCHEMAS: [string, z.ZodType][] = [
  ...BODY_ROUTES.map((route): [string, z.ZodType] => [`${route.method} ${route.path}`, route.schema]),
  ...Object.entries(IPC_METHODS).map(([method, schema]): [string, z.ZodType] => [`IPC ${method}`, schema]),
  ['FromWorker', FromWorker],
  ['FromHost', FromHost],
  // Shapes no route has yet, where a predicate could go wrong.
  ['a union whose first option strips', z.union([z.object({ a: z.string() }), z.strictObject({ a: z.string(), b: z.number() }), z.string()])],
  ['a record of refined keys', z.record(z.string().max(3).refine((key) => key !== 'no'), z.union([z.null(), z.number().int()]))],
  ['an object of optional and required unknowns', z.object({ a: z.unknown(), b: z.unknown().optional(), c: z.literal(['x', 1]).nullable() })],
  ['an object with a default, which only zod covers', z.strictObject({ a: z.string().default('x'), b: z.number().optional() })],
]

/** The schemas of a job on its way: the one-job submit, the worker API, the local workers' messages. */
const HOT = new Set<z.ZodType>([
  SubmitJob,
  WorkerExchange,
  FromWorker,
  FromHost,
  ...Object.values(IPC_METHODS),
  ...BODY_ROUTES.filter((route) => route.path.startsWith('/internal/worker/')).map((route) => route.schema),
])

const RUNS = Number(process.env.FUZZ_RUNS ?? 300)

describe('safeParseFast', () => {
  test.each(SCHEMAS)('what the compiled check of %s accepts, zod accepts and returns unchanged', (_name, schema) => {
    const check = compiledCheck(schema)
    if (check === null) {
      // A schema the predicate does not cover is zod's alone.
      fc.assert(fc.property(shaped(schema), (value) => void expect(safeParseFast(schema, value)).toEqual(schema.safeParse(value))), { numRuns: RUNS })
      return
    }
    fc.assert(
      fc.property(shaped(schema), (value) => {
        if (!check(value)) return
        const parsed = schema.safeParse(value)
        expect(parsed.success).toBe(true)
        expect(isDeepStrictEqual(parsed.data, value)).toBe(true)
      }),
      { numRuns: RUNS },
    )
  })

  test.each(SCHEMAS.filter(([, schema]) => compiledCheck(schema) !== null))('what zod returns unchanged from %s, its compiled check accepts', (_name, schema) => {
    const check = compiledCheck(schema)!
    let accepted = 0
    fc.assert(
      fc.property(shaped(schema), (value) => {
        const parsed = schema.safeParse(value)
        if (!parsed.success || !isDeepStrictEqual(parsed.data, value)) return
        accepted += 1
        expect(check(value)).toBe(true)
      }),
      { numRuns: RUNS },
    )
    // For the hot schemas, the values drawn reach the accepting paths, not only the refusals.
    if (HOT.has(schema)) expect(accepted).toBeGreaterThan(0)
  })

  test('the messages of a job on its way are checked without zod: the one-job submit, the worker API, the local workers', () => {
    for (const schema of HOT) expect(compiledCheck(schema)).not.toBeNull()
    const exchange = { worker_id: 'w1', complete: [{ job_id: 'j', attempt_id: 'a', lease_token: 't', stream: 'default', message_id: '7', result: { n: 1 } }], claim: { streams: ['default'], max_jobs: 8, max_wait_ms: 1000 } }
    expect(compiledCheck(FromWorker)!({ type: 'request', id: 1, method: 'exchange', params: exchange })).toBe(true)
    expect(compiledCheck(WorkerExchange)!(exchange)).toBe(true)
    expect(compiledCheck(SubmitJob)!({ job_type: 'noop', cost_units: 1, payload: { path: '/tmp/a' } })).toBe(true)
  })

  test('a refusal is zod’s own, word for word', () => {
    for (const value of [{ job_type: 'noop', cost_units: 1.5 }, { job_type: '', cost_units: 1, extra: true }, { job_type: 'a\u0000', cost_units: 0 }, 'text', null]) {
      const fast = safeParseFast(SubmitJob, value)
      const zod = SubmitJob.safeParse(value)
      expect(fast.success).toBe(false)
      expect(fast.error!.issues).toEqual(zod.error!.issues)
    }
  })

  test('a value the check accepts comes back as it is; one zod would change goes through zod', () => {
    const value = { job_type: 'noop', cost_units: 1 }
    expect(safeParseFast(SubmitJob, value)).toEqual({ success: true, data: value })
    expect(safeParseFast(SubmitJob, value).data).toBe(value)
    // A plain (non-strict) object strips a key it does not know: zod's answer, not the input.
    const plain = z.object({ a: z.string() })
    expect(compiledCheck(plain)).not.toBeNull()
    expect(safeParseFast(plain, { a: 'x', b: 1 })).toEqual({ success: true, data: { a: 'x' } })
    // A record's `__proto__` key is zod's to drop.
    const record = z.record(z.string(), z.boolean())
    expect(safeParseFast(record, JSON.parse('{"__proto__": true, "a": false}')).data).toEqual({ a: false })
  })

  test('a required field must be there even when it takes any value; an optional one may be absent', () => {
    const schema = z.strictObject({ params: z.unknown(), note: z.string().optional() })
    expect(compiledCheck(schema)!({})).toBe(false)
    expect(safeParseFast(schema, {}).success).toBe(false)
    expect(compiledCheck(schema)!({ params: undefined })).toBe(true)
    expect(compiledCheck(schema)!({ params: 1, note: undefined })).toBe(true)
  })

  test('a union answers what its first accepting option answers: a later option counts only where the earlier ones surely refuse', () => {
    // The plain first option takes {a, b} by stripping b: zod answers {a}, not the value as it came.
    const stripFirst = z.union([z.object({ a: z.string() }), z.strictObject({ a: z.string(), b: z.number() })])
    expect(compiledCheck(stripFirst)!({ a: 'x', b: 1 })).toBe(false)
    expect(safeParseFast(stripFirst, { a: 'x', b: 1 })).toEqual(stripFirst.safeParse({ a: 'x', b: 1 }))
    expect(compiledCheck(stripFirst)!({ a: 'x' })).toBe(true)
    // A value of another type, or without the earlier option's literal, is surely refused by it.
    expect(compiledCheck(z.union([z.string(), z.number()]))!(5)).toBe(true)
    expect(compiledCheck(FromWorker)!({ type: 'ready', worker_id: 'w1', types: ['noop'] })).toBe(true)
    expect(compiledCheck(FromWorker)!({ type: 'ready', worker_id: 'w1', types: ['noop'], extra: 1 })).toBe(false)
  })

  test('an enum takes the values zod takes: a TypeScript enum’s values, not its reverse keys', () => {
    enum Level {
      Low = 0,
      High = 1,
    }
    const schema = z.enum(Level)
    for (const value of [0, 1, 'Low', 'High', '0', 2]) expect(compiledCheck(schema)!(value)).toBe(schema.safeParse(value).success)
    expect(compiledCheck(schema)!(0)).toBe(true)
    expect(compiledCheck(schema)!('Low')).toBe(false)
  })

  test('where code cannot be made from strings, every schema is parsed by zod alone', () => {
    const original = globalThis.Function
    // zod compiles no code of its own there either.
    z.config({ jitless: true })
    globalThis.Function = function () {
      throw new EvalError('Code generation from strings disallowed for this context')
    } as unknown as FunctionConstructor
    try {
      const schema = z.strictObject({ a: z.string() })
      expect(compiledCheck(schema)).toBeNull()
      expect(safeParseFast(schema, { a: 'x' })).toEqual({ success: true, data: { a: 'x' } })
      expect(safeParseFast(schema, { a: 1 }).success).toBe(false)
    } finally {
      globalThis.Function = original
      z.config({ jitless: false })
    }
  })

  test('a schema with a part the check does not cover is parsed by zod alone', () => {
    const uncovered = [
      z.strictObject({ a: z.string().default('x') }),
      z.strictObject({ a: z.string().transform((s) => s.length) }),
      z.object({ when: z.iso.datetime().transform((s) => Date.parse(s)) }),
      z.coerce.number(),
      z.lazy(() => z.string()),
      z.looseObject({ a: z.string() }),
      z.looseRecord(z.string(), z.boolean()),
      z.xor([z.string(), z.string().min(2)]),
      z.string().email(),
      z.string().superRefine((s, ctx) => void (s.length > 2 && ctx.addIssue('long'))),
      z.string().check((payload) => void (payload.value === 'ab' && payload.issues.push({ code: 'custom', message: 'ab', input: payload.value }))),
    ]
    for (const schema of uncovered) {
      expect(compiledCheck(schema)).toBeNull()
      for (const value of [{}, { a: 'abc' }, '12', 'ab', { when: '2026-02-06T20:15:30.123Z' }]) {
        expect(safeParseFast(schema, value)).toEqual(schema.safeParse(value))
      }
    }
  })
})
