import { isDeepStrictEqual } from 'node:util'

/**
 * Whether two values are the same JSON document: each as it would be stored (through JSON, so
 * `-0` is `0` and an `undefined` member is absent), an object's members in any order — the order
 * a client's JSON library writes them in says nothing about the job. An array's order counts.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(throughJson(a), throughJson(b))
}

const throughJson = (value: unknown): unknown => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)))
