import { describe, expect, test } from 'vitest'
import { parseServeArgs } from '../../src-main/config'
import { splitArgs } from '../../src-main/desktop/app-args'

describe('splitArgs', () => {
  test("Leasehold's flags are taken in both spellings, Chromium's switches left alone", () => {
    const argv = ['--inspect=0', '--port', '9000', '--no-sandbox', '--busy=3', '--remote-debugging-port=0', '--data-dir', '/tmp/x']
    expect(splitArgs(argv)).toEqual({
      leasehold: ['--port', '9000', '--busy=3', '--data-dir', '/tmp/x'],
      others: ['--inspect=0', '--no-sandbox', '--remote-debugging-port=0'],
    })
  })

  test('only exact flag names are ours: look-alike Chromium switches are not', () => {
    expect(splitArgs(['--host-rules=MAP * 127.0.0.1', '--user-data-dir=/tmp/u', '--portable']).leasehold).toEqual([])
  })

  test("the app path and Playwright's switches, wherever they stand, are not ours", () => {
    const argv = ['--inspect=0', '--remote-debugging-port=0', '/home/ada/leasehold', '--port', '0', '.']
    expect(splitArgs(argv)).toEqual({ leasehold: ['--port', '0'], others: ['--inspect=0', '--remote-debugging-port=0', '/home/ada/leasehold', '.'] })
  })

  test('a flag without its value stays, so parseServeArgs names what is missing', () => {
    const { leasehold } = splitArgs(['--no-sandbox', '--port'])
    expect(leasehold).toEqual(['--port'])
    expect(() => parseServeArgs(leasehold, {})).toThrow(/--port/)
  })

  test('the split flags configure the host as `leasehold serve` would', () => {
    const config = parseServeArgs(splitArgs(['--enable-logging', '--port', '9000', '--workers=0']).leasehold, {}, { dataDir: '/tmp/d' })
    expect(config).toMatchObject({ port: 9000, workers: 0, dataDir: '/tmp/d' })
  })

  test('a bad value is still refused, naming the flag', () => {
    expect(() => parseServeArgs(splitArgs(['--port', 'ninety']).leasehold, {})).toThrow(/--port must be a whole number/)
  })
})
