import { describe, expect, test } from 'vitest'
import { checkRequest, type GuardPolicy, ownHostNames, tokensMatch } from '../../src-main/http/guard'

const policy: GuardPolicy = { token: 'secret-token-0123456789', port: 7878, allowedHosts: ['leasehold.lan'] }
const ok = { path: '/api/capacity', host: '127.0.0.1:7878', origin: undefined, authorization: 'Bearer secret-token-0123456789' }

describe('request guard', () => {
  test('a loopback Host with the right port and the token passes', () => {
    for (const host of ['127.0.0.1:7878', 'localhost:7878', '[::1]:7878', 'LOCALHOST:7878', 'leasehold.lan:7878']) {
      expect(checkRequest({ ...ok, host }, policy)).toBeNull()
    }
  })

  test('a Host naming another server or another port is 403 (DNS rebinding)', () => {
    for (const host of ['evil.example:7878', '127.0.0.1:8080', 'localhost', undefined, '127.0.0.1.evil.example:7878']) {
      expect(checkRequest({ ...ok, host }, policy)?.code).toBe('forbidden_host')
    }
  })

  test('the address a server listens on and the URL it publishes are its own names; a wildcard address is not one, and loopback is already', () => {
    expect(ownHostNames('192.0.2.2', 'http://192.0.2.2:7878')).toEqual(['192.0.2.2'])
    expect(ownHostNames('leasehold.lan', 'http://192.0.2.2:7878')).toEqual(['192.0.2.2', 'leasehold.lan'])
    expect(ownHostNames('FE80::1', 'http://[fe80::1]:7878')).toEqual(['[fe80::1]'])
    expect(ownHostNames('0.0.0.0', 'http://127.0.0.1:7878')).toEqual([])
    expect(ownHostNames('::', 'http://[::1]:7878')).toEqual([])
    expect(ownHostNames('127.0.0.1', 'http://127.0.0.1:7878')).toEqual([])
    const listening = { ...policy, allowedHosts: ownHostNames('192.0.2.2', 'http://192.0.2.2:7878') }
    expect(checkRequest({ ...ok, host: '192.0.2.2:7878', origin: 'http://192.0.2.2:7878' }, listening)).toBeNull()
    expect(checkRequest({ ...ok, host: '192.0.2.3:7878' }, listening)?.code).toBe('forbidden_host')
  })

  test("an Origin other than the server's own is 403; the server's own passes", () => {
    expect(checkRequest({ ...ok, origin: 'http://evil.example' }, policy)?.code).toBe('forbidden_origin')
    expect(checkRequest({ ...ok, origin: 'null' }, policy)?.code).toBe('forbidden_origin')
    expect(checkRequest({ ...ok, origin: 'http://localhost:7878' }, policy)).toBeNull()
  })

  test('every /api and /internal path needs the token except /api/health, however it is spelled', () => {
    for (const path of ['/api/capacity', '/API/capacity', '/internal/worker/claim', '/%61pi/capacity', '//api/capacity', '/api']) {
      expect(checkRequest({ ...ok, path, authorization: undefined }, policy)?.code, path).toBe('unauthorized')
    }
    expect(checkRequest({ ...ok, path: '/api/health', authorization: undefined }, policy)).toBeNull()
  })

  test('a wrong token, or one without the Bearer scheme, is 401', () => {
    expect(checkRequest({ ...ok, authorization: 'Bearer wrong' }, policy)?.code).toBe('unauthorized')
    expect(checkRequest({ ...ok, authorization: 'secret-token-0123456789' }, policy)?.code).toBe('unauthorized')
  })

  test('tokens are compared whatever their lengths', () => {
    expect(tokensMatch('abc', 'abc')).toBe(true)
    expect(tokensMatch('abc', 'abcd')).toBe(false)
    expect(tokensMatch('', 'abc')).toBe(false)
  })

  test('only the whole token matches: not one it starts, not one that starts with it, not one with another byte', () => {
    const token = 'secret-token-0123456789'
    expect(tokensMatch(token, token)).toBe(true)
    expect(tokensMatch(`${token}0`, token)).toBe(false)
    expect(tokensMatch(`${token}\0`, token)).toBe(false)
    expect(tokensMatch(token.slice(0, -1), token)).toBe(false)
    expect(tokensMatch(`${token.slice(0, -1)}\0`, token)).toBe(false)
    expect(tokensMatch(`${token.slice(0, -1)}8`, token)).toBe(false)
    // The same number of characters, not of bytes; and back to the right token after wrong ones.
    expect(tokensMatch(`${token.slice(0, -1)}é`, token)).toBe(false)
    expect(tokensMatch('é'.repeat(token.length), token)).toBe(false)
    expect(tokensMatch(token, token)).toBe(true)
    expect(tokensMatch('', '')).toBe(true)
    expect(tokensMatch('x', '')).toBe(false)
  })
})
