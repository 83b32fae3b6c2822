import { describe, expect, it } from 'vitest'
import { contentSecurityPolicy, windowOptions } from '../../src-main/desktop/window-options'

const PRELOAD = '/app/out/preload/preload.cjs'

function directives(policy: string): Map<string, string[]> {
  return new Map(
    policy
      .split(';')
      .map((part) => part.trim().split(/\s+/))
      .filter((words) => words[0])
      .map(([name, ...sources]) => [name!, sources]),
  )
}

describe('windowOptions', () => {
  const prefs = windowOptions(PRELOAD).webPreferences ?? {}

  it('loads the given preload', () => {
    expect(prefs.preload).toBe(PRELOAD)
  })

  // Each setting is spelled out rather than left to Electron's default, so a change of
  // default (or a deleted line) cannot weaken the window silently.
  it.each([
    ['contextIsolation', true],
    ['sandbox', true],
    ['nodeIntegration', false],
    ['nodeIntegrationInWorker', false],
    ['nodeIntegrationInSubFrames', false],
    ['webSecurity', true],
    ['allowRunningInsecureContent', false],
    ['webviewTag', false],
    ['experimentalFeatures', false],
  ] as const)('sets %s to %s', (name, value) => {
    expect(prefs[name]).toBe(value)
  })
})

describe('contentSecurityPolicy', () => {
  const API = 'http://127.0.0.1:7878'

  it('allows only the page itself and the host', () => {
    const policy = directives(contentSecurityPolicy({ apiBase: `${API}/` }))
    expect(policy.get('default-src')).toEqual(["'self'"])
    expect(policy.get('connect-src')).toEqual(["'self'", API])
    expect(policy.get('style-src')).toEqual(["'self'"])
    expect(policy.get('object-src')).toEqual(["'none'"])
    expect(policy.get('frame-src')).toEqual(["'none'"])
    expect(policy.get('base-uri')).toEqual(["'none'"])
  })

  it('never allows inline or evaluated scripts', () => {
    for (const devServerUrl of [undefined, 'http://localhost:5173']) {
      const policy = contentSecurityPolicy(devServerUrl ? { apiBase: API, devServerUrl } : { apiBase: API })
      expect(policy).not.toMatch(/unsafe-eval/)
      expect(directives(policy).get('script-src')).toBeUndefined() // falls back to default-src 'self'
    }
  })

  it('in development adds only the HMR socket and inline styles', () => {
    const policy = directives(contentSecurityPolicy({ apiBase: API, devServerUrl: 'http://localhost:5173/' }))
    expect(policy.get('connect-src')).toEqual(["'self'", API, 'ws://localhost:5173'])
    expect(policy.get('style-src')).toEqual(["'self'", "'unsafe-inline'"])
    expect(policy.get('default-src')).toEqual(["'self'"])
  })
})
