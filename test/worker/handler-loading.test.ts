import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { loadHandlers } from '../../src-worker/handlers'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

test('two handler files of one job type: the later in name order runs it, and the earlier is reported as a handler that did not load, naming the other', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-handlers-'))
  dirs.push(dir)
  writeFileSync(join(dir, 'a-resize.mjs'), "export default { type: 'resize', run: () => 'a' }")
  writeFileSync(join(dir, 'b-resize.mjs'), "export default { type: 'resize', run: () => 'b' }")
  writeFileSync(join(dir, 'other.mjs'), "export default { type: 'other', run: () => 'o' }")
  const { handlers, problems } = await loadHandlers({ handlersDir: dir, execAllow: [] })
  expect(await handlers.get('resize')!.run({} as never)).toBe('b')
  expect(problems).toEqual([{ file: join(dir, 'a-resize.mjs'), error: 'job type "resize" is exported by b-resize.mjs too, which loads after it (in name order) and runs it' }])
})

test("a handler file whose own code throws as it loads is reported with the line of the throw", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-handlers-'))
  dirs.push(dir)
  writeFileSync(join(dir, 'throws.mjs'), "const size = 1\nif (size) throw new Error('no config')\nexport default { type: 'throws', run: () => 1 }\n")
  const { problems } = await loadHandlers({ handlersDir: dir, execAllow: [] })
  expect(problems).toEqual([{ file: join(dir, 'throws.mjs'), error: 'no config (throws.mjs line 2)' }])
})
