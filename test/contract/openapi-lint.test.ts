/**
 * The OpenAPI document passes an independent linter: Redocly's `lint` with the rules in
 * redocly.yaml (its recommended-strict set; each rule turned off there says why). Offline: the
 * document is written to a file and Redocly's telemetry and update check are off.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { expect, test } from 'vitest'
import { openApiDocument } from '../../src-main/http/openapi'
import { VERSION } from '../../src-main/version'

const root = resolve(import.meta.dirname, '../..')

test('the OpenAPI document passes `redocly lint` (recommended-strict, see redocly.yaml)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-openapi-'))
  try {
    const file = join(dir, 'openapi.json')
    writeFileSync(file, JSON.stringify(openApiDocument(VERSION), null, 2))
    const cli = join(root, 'node_modules/@redocly/cli/bin/cli.js')
    const run = await promisify(execFile)(process.execPath, [cli, 'lint', file, '--config', join(root, 'redocly.yaml'), '--format', 'stylish'], {
      cwd: dir,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      timeout: 120_000,
    }).catch((error: { stdout?: string; stderr?: string; code?: number }) => ({ ...error, failed: true }))
    const output = `${run.stdout ?? ''}${run.stderr ?? ''}`
    expect('failed' in run, output).toBe(false)
    expect(output).toMatch(/Your API description is valid/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
