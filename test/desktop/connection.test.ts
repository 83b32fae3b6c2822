// @vitest-environment happy-dom
import { afterEach, describe, expect, test } from 'vitest'
import { resolveConnection } from '../../src-renderer/lib/connection'

type Bridge = { leasehold?: { apiBase: string } }

afterEach(() => {
  delete (window as unknown as Bridge).leasehold
  sessionStorage.clear()
  history.replaceState(null, '', '/')
})

describe('resolveConnection', () => {
  test('in Electron: the base URL from the preload and no token (the main process adds it to each request)', () => {
    ;(window as unknown as Bridge).leasehold = { apiBase: 'http://127.0.0.1:7878' }
    expect(resolveConnection()).toEqual({ apiBase: 'http://127.0.0.1:7878', token: '' })
  })

  test('in a browser: the token from #token=, kept for the tab and taken out of the address bar', () => {
    history.replaceState(null, '', '/#token=abc123')
    expect(resolveConnection()).toEqual({ apiBase: location.origin, token: 'abc123' })
    expect(location.hash).toBe('')
    expect(resolveConnection()).toEqual({ apiBase: location.origin, token: 'abc123' })
  })

  test('in a browser without a token: none, so the page asks for one', () => {
    expect(resolveConnection()).toBeNull()
  })
})
