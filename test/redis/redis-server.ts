import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'

/** Debian's redis-server (CI installs it: .ci/run). */
export const REDIS_SERVER = '/usr/bin/redis-server'

/** A port nobody listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/**
 * A redis-server of a test's own, on a free loopback port, with a temp dir and no persistence:
 * a restart starts it empty (as a Redis that lost its memory does).
 */
export class TestRedis {
  private child: ChildProcess | null = null
  private readonly dir = mkdtempSync(join(tmpdir(), 'leasehold-redis-'))

  private constructor(readonly port: number) {}

  static async start(): Promise<TestRedis> {
    const redis = new TestRedis(await freePort())
    await redis.restart()
    return redis
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`
  }

  get pid(): number | undefined {
    return this.child?.pid
  }

  /** Starts it (again, empty) on the same port; resolves once it accepts connections. */
  restart(): Promise<void> {
    const child = spawn(REDIS_SERVER, ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.child = child
    let out = ''
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${out}`)), 10_000)
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString()
        if (out.includes('Ready to accept connections')) {
          clearTimeout(timer)
          resolve()
        }
      })
      child.once('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`redis-server exited (${code}): ${out}`))
      })
    })
  }

  /** Kills it by its pid (SIGKILL: nothing is saved) and waits for it to be gone. */
  async kill(): Promise<void> {
    const child = this.child
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    const gone = new Promise((resolve) => child.once('exit', resolve))
    process.kill(child.pid!, 'SIGKILL')
    await gone
    this.child = null
  }

  async stop(): Promise<void> {
    await this.kill()
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/**
 * One redis-server for a test file, started before its tests and stopped after, and a client of
 * the test's own to look inside (`admin`). `get()` reads them once the hooks have run.
 */
export function useTestRedis(): { get(): { server: TestRedis; admin: Redis } } {
  let server: TestRedis
  let admin: Redis
  beforeAll(async () => {
    server = await TestRedis.start()
    admin = new Redis(server.url)
    admin.on('error', () => {}) // it reconnects on its own while a test has Redis down
  })
  afterAll(async () => {
    admin.disconnect()
    await server.stop()
  })
  return { get: () => ({ server, admin }) }
}
