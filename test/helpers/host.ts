import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { request } from 'node:http'
import { join } from 'node:path'
import { type HostConfig, parseServeArgs } from '../../src-main/config'
import { type Host, type HostOptions, startHost } from '../../src-main/host'
import { holdFetchToContract, holdToContract } from './contract'

export function tempDir(prefix = 'leasehold-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

/**
 * A host config as `leasehold serve` would build it, on a fresh data dir and a free port, with
 * no local workers unless a test asks for them (they would take the test's jobs).
 */
export function testConfig(overrides: Partial<HostConfig> = {}): HostConfig {
  return { ...parseServeArgs(['--port', '0', '--busy', '0', '--workers', '0'], {}, { dataDir: tempDir() }), ...overrides }
}

export interface TestHost extends Host {
  dataDir: string
  /** fetch against the host with its token; `init.token: null` sends none. */
  call(path: string, init?: RequestInit & { json?: unknown; token?: string | null }): Promise<Response>
  /** Stops the host and removes its data dir. */
  dispose(): Promise<void>
}

export async function startTestHost(
  overrides: Partial<HostConfig> = {},
  options: Pick<HostOptions, 'clock' | 'log' | 'rendererDir' | 'machineCpu' | 'openFiles'> = {},
): Promise<TestHost> {
  const config = testConfig(overrides)
  const host = await startHost(config, { log: () => {}, ...options })
  const call = async (path: string, init: RequestInit & { json?: unknown; token?: string | null } = {}) => {
    const headers = new Headers(init.headers)
    const token = init.token === undefined ? host.token : init.token
    if (token !== null) headers.set('authorization', `Bearer ${token}`)
    let body = init.body
    if (init.json !== undefined) {
      headers.set('content-type', 'application/json')
      body = JSON.stringify(init.json)
    }
    const res = await fetch(`${host.url}${path}`, { ...init, headers, body })
    await holdFetchToContract(init.method ?? 'GET', path, res)
    return res
  }
  return {
    ...host,
    url: host.url,
    token: host.token,
    engine: host.engine,
    pool: host.pool,
    stop: host.stop,
    dataDir: config.dataDir,
    call,
    dispose: async () => {
      await host.stop()
      rmSync(config.dataDir, { recursive: true, force: true })
    },
  }
}

/** A request through node:http, for headers fetch refuses to set (Host); its answer is held to the OpenAPI document too. */
export function rawRequest(
  url: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: import('node:http').IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url + options.path, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () => {
        const status = res.statusCode ?? 0
        try {
          holdToContract({ method: options.method ?? 'GET', target: options.path, status, header: (name) => headerValue(res.headers[name.toLowerCase()]), body })
        } catch (error) {
          return reject(error)
        }
        resolve({ status, headers: res.headers, body })
      })
    })
    req.on('error', reject)
    req.end(options.body)
  })
}

const headerValue = (value: string | string[] | undefined): string | null => (value === undefined ? null : Array.isArray(value) ? value.join(', ') : value)
