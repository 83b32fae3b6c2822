import { describe, expect, test } from 'vitest'
import { developmentServer, trustedSender, withAuthorization } from '../../src-main/desktop/trust'

const PAGE = 'http://127.0.0.1:7878'

describe('trustedSender', () => {
  const ours = { origin: PAGE, isTopFrame: true, fromOurWindow: true }

  test("our window's top frame at the page's origin is answered", () => {
    expect(trustedSender(ours, `${PAGE}/`)).toBe(true)
  })

  test.each([
    ['another origin', { ...ours, origin: 'http://127.0.0.1:9999' }],
    ['an opaque origin', { ...ours, origin: 'null' }],
    ['a frame that is gone', { ...ours, origin: null }],
    ['an iframe', { ...ours, isTopFrame: false }],
    ['another web contents', { ...ours, fromOurWindow: false }],
  ])('%s is not', (_name, frame) => {
    expect(trustedSender(frame, PAGE)).toBe(false)
  })
})

describe('withAuthorization', () => {
  const api = { origin: PAGE, token: 's3cret' }

  test("requests to the page's origin get the token; the renderer's empty bearer is replaced", () => {
    expect(withAuthorization(`${PAGE}/api/capacity`, { Accept: 'application/json', Authorization: 'Bearer' }, api)).toEqual({
      Accept: 'application/json',
      Authorization: 'Bearer s3cret',
    })
    expect(withAuthorization(`${PAGE}/api/events/stream?ticket=t`, { authorization: 'Bearer ' }, api)).toEqual({ Authorization: 'Bearer s3cret' })
    expect(withAuthorization(`${PAGE}/`, {}, api)).toEqual({ Authorization: 'Bearer s3cret' })
  })

  test('a token the user typed into the page is sent as typed', () => {
    const headers = { Authorization: 'Bearer typed-by-user' }
    expect(withAuthorization(`${PAGE}/api/capacity`, headers, api)).toBe(headers)
  })

  test('no other origin ever gets the token', () => {
    for (const url of ['http://127.0.0.1:7879/api/capacity', 'http://localhost:7878/api/capacity', 'https://example.com/', 'not a url']) {
      expect(withAuthorization(url, { Accept: '*/*' }, api)).toEqual({ Accept: '*/*' })
    }
  })
})

describe('developmentServer', () => {
  test("electron-vite dev's server on this machine is used from the source tree", () => {
    expect(developmentServer({ ELECTRON_RENDERER_URL: 'http://localhost:5173' }, false)).toBe('http://localhost:5173')
    expect(developmentServer({ ELECTRON_RENDERER_URL: 'http://127.0.0.1:5173/' }, false)).toBe('http://127.0.0.1:5173/')
  })

  test('never in a packaged app, never another machine, never a non-http page', () => {
    expect(developmentServer({ ELECTRON_RENDERER_URL: 'http://localhost:5173' }, true)).toBeUndefined()
    expect(developmentServer({ ELECTRON_RENDERER_URL: 'http://evil.example:5173' }, false)).toBeUndefined()
    expect(developmentServer({ ELECTRON_RENDERER_URL: 'file:///tmp/x.html' }, false)).toBeUndefined()
    expect(developmentServer({ ELECTRON_RENDERER_URL: 'nonsense' }, false)).toBeUndefined()
    expect(developmentServer({}, false)).toBeUndefined()
  })
})
