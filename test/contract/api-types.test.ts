/**
 * The committed client types (src-shared/api-types.ts) are the ones the OpenAPI document makes
 * now: a route or view whose schema changed without `npm run api:types` fails here.
 */
import { readFileSync } from 'node:fs'
import { expect, test } from 'vitest'
import { API_TYPES_COMMAND, API_TYPES_FILE, renderApiTypes } from '../../scripts/api-types'

test('src-shared/api-types.ts is what openapi-typescript makes of the document now', async () => {
  const fresh = await renderApiTypes()
  const committed = readFileSync(API_TYPES_FILE, 'utf8')
  expect(committed === fresh, `src-shared/api-types.ts is stale: run \`${API_TYPES_COMMAND}\` and commit the file`).toBe(true)
})
