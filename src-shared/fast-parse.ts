import type { z } from 'zod'

/**
 * zod's `safeParse` with a fast way through for the values it would hand back unchanged.
 *
 * The host validates every request body and every message of its local workers with zod, and
 * zod is the truth of what each accepts. But zod runs every schema through the same generic
 * machinery (a payload object per node, issue lists, checks called through shared functions
 * that see every schema's shapes), which in the host cost a few percent of its CPU a job
 * (docs/performance.md). {@link compiledCheck} reads a schema's definition once and writes a
 * predicate of its own for it, as JavaScript source: each object's fields read by name, each
 * check inline, so that V8 sees one shape at each place. It says whether zod would accept a
 * value and return it as it is. A value it accepts is returned without zod; any other goes
 * through zod, so every refusal, and its message, is zod's own.
 *
 * The predicate covers what the hot schemas are made of: strict and plain objects, arrays,
 * records with string keys, unions, optional and nullable, strings, numbers, booleans, enums,
 * literals, null and unknown, with the checks min/max length, greater/less than, whole numbers
 * (`int()`), a regex or ISO date-time format, and refinements. A schema with anything else (a
 * default, a transform, a pipe, a lazy or coerced part…) gets no predicate and is parsed by zod
 * alone. A value the predicate is unsure of — an object key the schema would strip, a
 * `__proto__` key, an object not made as JSON makes them — is left to zod too.
 * test/unit/fast-parse.test.ts holds it to zod: whatever it accepts, zod accepts and returns equal.
 */
export function safeParseFast<S extends z.ZodType>(schema: S, value: unknown): z.ZodSafeParseResult<z.output<S>> {
  const check = compiledCheck(schema)
  if (check !== null && check(value)) return { success: true, data: value as z.output<S> }
  return schema.safeParse(value)
}

type Check = (value: unknown) => boolean

const compiled = new WeakMap<z.ZodType, Check | null>()

/**
 * The predicate of `schema` (see {@link safeParseFast}), or null when the schema has a part it
 * does not cover. Made once per schema object: the schemas it serves are made once, at load.
 */
export function compiledCheck(schema: z.ZodType): Check | null {
  let check = compiled.get(schema)
  if (check === undefined) {
    check = compile(schema)
    compiled.set(schema, check)
  }
  return check
}

/** A part of a schema the predicate does not cover: the whole schema is then left to zod. */
class Uncovered extends Error {}

/** What the predicate reads of zod's definitions (zod/v4/core: `schema._zod.def`). */
interface Def {
  type: string
  checks?: { _zod: { def: CheckDef } }[]
  coerce?: boolean
  /** Set when the schema is a check itself (a string format, `z.int()`). */
  check?: string
  shape?: Record<string, z.ZodType>
  catchall?: z.ZodType
  element?: z.ZodType
  keyType?: z.ZodType
  valueType?: z.ZodType
  options?: z.ZodType[]
  inclusive?: boolean
  discriminator?: string
  /** A discriminated union's: an unknown discriminator tries every option in order. */
  unionFallback?: boolean
  /** A record's: `loose` passes keys its key schema refuses. */
  mode?: string
  innerType?: z.ZodType
}

interface CheckDef {
  check: string
  minimum?: number
  maximum?: number
  value?: number
  inclusive?: boolean
  format?: string
  pattern?: RegExp
  fn?: (value: unknown) => unknown
}

const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def

/** The string formats whose whole check is their pattern (zod's $ZodCheckStringFormat). */
const PATTERN_FORMATS = new Set(['regex', 'datetime'])

/** A refinement's verdict as zod takes it: truthy passes; a promise is zod's to await. */
const passes = (result: unknown): boolean => !(result instanceof Promise) && Boolean(result)

/** An object as JSON makes them, which zod returns as an equal one: not null, not an array, its prototype Object's. */
const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype

function compile(schema: z.ZodType): Check | null {
  const source = new Source()
  let top: string
  try {
    top = source.function((v) => `return ${source.expression(schema, v)}`)
  } catch (error) {
    if (error instanceof Uncovered) return null
    throw error
  }
  let make: (...helpers: unknown[]) => Check
  try {
    make = new Function('c', 'passes', 'isPlainObject', `${source.functions.join('\n')}\nreturn ${top}`) as typeof make
  } catch {
    return null // code from strings is not allowed here (--disallow-code-generation-from-strings): zod alone
  }
  return make(source.constants, passes, isPlainObject)
}

/** The predicate's source: one function per object, array, record or union, the rest inline. */
class Source {
  readonly functions: string[] = []
  /** The values the source names as `c[i]`: sets, patterns, refinements. */
  readonly constants: unknown[] = []

  constant(value: unknown): string {
    this.constants.push(value)
    return `c[${this.constants.length - 1}]`
  }

  /** Adds a function of one value `v` whose body `body` writes; returns its name. */
  function(body: (v: string) => string): string {
    const name = `p${this.functions.length}`
    this.functions.push('') // its place, so that the functions it makes come after it
    const index = this.functions.length - 1
    this.functions[index] = `function ${name}(v) {\n${body('v')}\n}`
    return name
  }

  /** A boolean expression: whether zod accepts the value of variable `x` as it is. */
  expression(schema: z.ZodType, x: string): string {
    const def = defOf(schema)
    if (def.coerce) throw new Uncovered()
    const checks = [...(def.check !== undefined ? [def as CheckDef] : []), ...(def.checks ?? []).map((check) => check._zod.def)]
    return [this.type(schema, def, x), ...checks.map((check) => this.check(check, x))].join(' && ')
  }

  private type(schema: z.ZodType, def: Def, x: string): string {
    switch (def.type) {
      case 'string':
        return `typeof ${x} === 'string'`
      case 'number':
        return `typeof ${x} === 'number' && Number.isFinite(${x})`
      case 'boolean':
        return `typeof ${x} === 'boolean'`
      case 'null':
        return `${x} === null`
      case 'unknown':
      case 'any':
        return 'true'
      case 'enum':
      case 'literal':
        return `${this.values(schema)}.has(${x})`
      case 'optional':
        return `(${x} === undefined || (${this.expression(def.innerType!, x)}))`
      case 'nullable':
        return `(${x} === null || (${this.expression(def.innerType!, x)}))`
      case 'array':
        return `${this.arrayFunction(def)}(${x})`
      case 'object':
        return `${this.objectFunction(def)}(${x})`
      case 'record':
        return `${this.recordFunction(def)}(${x})`
      case 'union':
        return this.union(def, x)
      default:
        throw new Uncovered()
    }
  }

  /**
   * A discriminated union runs the one option its discriminator names, so no value meets two.
   * A plain union returns what the first option that accepts returns, changed or not: a later
   * option counts only where every earlier one surely refuses the value ({@link refuses}). An
   * exclusive union (one option exactly) is left to zod.
   */
  private union(def: Def, x: string): string {
    const options = def.options!
    const accepts = (option: z.ZodType) => `${this.function((v) => `return ${this.expression(option, v)}`)}(${x})`
    if (def.discriminator !== undefined && !def.unionFallback) return `(${options.map(accepts).join(' || ')})`
    if (def.inclusive === false) throw new Uncovered()
    let expression = accepts(options[options.length - 1]!)
    for (let i = options.length - 2; i >= 0; i--) {
      const refused = this.refuses(options[i]!, x)
      expression = refused === null ? accepts(options[i]!) : `(${accepts(options[i]!)} || (${refused} && ${expression}))`
    }
    return expression
  }

  /**
   * An expression true only where zod surely refuses the value of `x` for `schema`: its type is
   * not the schema's, or an object lacks a required literal field's value. Null when no such
   * test is at hand.
   */
  private refuses(schema: z.ZodType, x: string): string | null {
    const def = defOf(schema)
    switch (def.type) {
      case 'string':
      case 'number':
      case 'boolean':
        return `typeof ${x} !== '${def.type}'`
      case 'null':
        return `${x} !== null`
      case 'array':
        return `!Array.isArray(${x})`
      case 'enum':
      case 'literal':
        return `!${this.values(schema)}.has(${x})`
      case 'object': {
        const tests = [`typeof ${x} !== 'object'`, `${x} === null`, `Array.isArray(${x})`]
        for (const [key, field] of Object.entries(def.shape ?? {})) {
          const fieldDef = defOf(field)
          const required = (field as unknown as { _zod: { optin?: string } })._zod.optin === undefined
          if (!required || (fieldDef.type !== 'literal' && fieldDef.type !== 'enum')) continue
          const name = JSON.stringify(key)
          tests.push(`!(${name} in ${x})`, `!${this.values(field)}.has(${x}[${name}])`)
        }
        return `(${tests.join(' || ')})`
      }
      default:
        return null
    }
  }

  /** The set of values zod itself accepts for an enum or literal (an enum's without a TypeScript enum's reverse keys). */
  private values(schema: z.ZodType): string {
    const values = (schema as unknown as { _zod: { values?: unknown } })._zod.values
    if (!(values instanceof Set)) throw new Uncovered()
    return this.constant(values)
  }

  private arrayFunction(def: Def): string {
    return this.function(
      (v) => `if (!Array.isArray(${v})) return false
for (let i = 0; i < ${v}.length; i++) { const e = ${v}[i]; if (!(${this.expression(def.element!, 'e')})) return false }
return true`,
    )
  }

  /** A strict object, or a plain one holding no key it would strip: each field read by name, no key beyond them. */
  private objectFunction(def: Def): string {
    if (def.catchall !== undefined && defOf(def.catchall).type !== 'never') throw new Uncovered()
    const fields = Object.entries(def.shape ?? {})
    return this.function((v) => {
      const known = fields.length === 0 ? '' : `${fields.map(([key]) => `case ${JSON.stringify(key)}:`).join(' ')} break\n`
      const lines = [`if (!isPlainObject(${v})) return false`, `for (const k in ${v}) switch (k) { ${known}default: return false }`]
      fields.forEach(([key, field], i) => {
        // As zod reads a field: a required one must be there (`in`, as zod asks); an optional one may be absent.
        const name = JSON.stringify(key)
        const { optin, optout } = (field as unknown as { _zod: { optin?: string; optout?: string } })._zod
        const absent = optin === undefined ? 'false' : optin === 'optional' && optout === 'optional' ? 'true' : null
        if (absent === null) throw new Uncovered()
        lines.push(`const f${i} = ${v}[${name}]`, `if (!(${name} in ${v} ? ${this.expression(field, `f${i}`)} : ${absent})) return false`)
      })
      return [...lines, 'return true'].join('\n')
    })
  }

  /** A record of string keys: each key and each value checked; a `__proto__` key is left to zod. */
  private recordFunction(def: Def): string {
    if (defOf(def.keyType!).type !== 'string' || def.mode !== undefined) throw new Uncovered()
    return this.function(
      (v) => `if (!isPlainObject(${v})) return false
if (Object.getOwnPropertySymbols(${v}).length > 0) return false
for (const k in ${v}) {
  if (k === '__proto__' || !Object.hasOwn(${v}, k) || !(${this.expression(def.keyType!, 'k')})) return false
  const e = ${v}[k]
  if (!(${this.expression(def.valueType!, 'e')})) return false
}
return true`,
    )
  }

  private check(check: CheckDef, x: string): string {
    switch (check.check) {
      case 'min_length':
        return `${x}.length >= ${this.number(check.minimum)}`
      case 'max_length':
        return `${x}.length <= ${this.number(check.maximum)}`
      case 'greater_than':
        return `${x} ${check.inclusive ? '>=' : '>'} ${this.number(check.value)}`
      case 'less_than':
        return `${x} ${check.inclusive ? '<=' : '<'} ${this.number(check.value)}`
      case 'number_format':
        if (check.format !== 'safeint') throw new Uncovered()
        return `Number.isSafeInteger(${x})`
      case 'string_format': {
        if (!check.pattern || !PATTERN_FORMATS.has(check.format ?? '')) throw new Uncovered()
        const pattern = this.constant(check.pattern)
        return `(${pattern}.lastIndex = 0, ${pattern}.test(${x}))`
      }
      case 'custom':
        // A refinement's function; a `check()` or `superRefine()` works on zod's payload instead.
        if (typeof check.fn !== 'function') throw new Uncovered()
        return `passes(${this.constant(check.fn)}(${x}))`
      default:
        throw new Uncovered()
    }
  }

  /** A bound as the source writes it: a finite number literally, anything else is not covered. */
  private number(value: number | undefined): string {
    if (typeof value !== 'number' || !Number.isFinite(value)) throw new Uncovered()
    return String(value)
  }
}
