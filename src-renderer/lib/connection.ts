/** Where the API is and the token to call it with. */
export interface Connection {
  apiBase: string
  token: string
}

/** Survives reloads of the tab, not the tab itself, and is never sent anywhere but the host. */
const TOKEN_KEY = 'leasehold.token'

/**
 * In Electron the preload hands over the API's base URL and no token: the main process adds the
 * Authorization header to the window's requests, so the page never holds the token (the empty
 * one here is replaced on the way out). In a browser the page is served by the host, so the API
 * is this page's origin, and the token arrives once in the URL fragment (`#token=…`, never sent
 * to a server): it is kept in sessionStorage and removed from the address bar and history. Null
 * when no token is known.
 */
export function resolveConnection(): Connection | null {
  if (window.leasehold) return { apiBase: window.leasehold.apiBase, token: '' }
  const fragment = new URLSearchParams(location.hash.slice(1))
  const fromFragment = fragment.get('token')
  if (fromFragment) {
    sessionStorage.setItem(TOKEN_KEY, fromFragment)
    fragment.delete('token')
    const rest = fragment.toString()
    history.replaceState(history.state, '', `${location.pathname}${location.search}${rest ? `#${rest}` : ''}`)
  }
  const token = sessionStorage.getItem(TOKEN_KEY)
  return token ? { apiBase: location.origin, token } : null
}

/** Keeps a token the operator typed in, as one from the link would be kept. */
export function storeToken(token: string): Connection {
  sessionStorage.setItem(TOKEN_KEY, token)
  return { apiBase: window.leasehold?.apiBase ?? location.origin, token }
}
