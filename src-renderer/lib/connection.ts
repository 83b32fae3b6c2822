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
  takeTokenFromFragment()
  const token = sessionStorage.getItem(TOKEN_KEY)
  return token ? { apiBase: location.origin, token } : null
}

/**
 * The token of a `#token=…` link, kept in sessionStorage and removed from the address bar and
 * history; null when the fragment has none.
 */
function takeTokenFromFragment(): string | null {
  const fragment = new URLSearchParams(location.hash.slice(1))
  const token = fragment.get('token')
  if (!token) return null
  sessionStorage.setItem(TOKEN_KEY, token)
  fragment.delete('token')
  const rest = fragment.toString()
  history.replaceState(history.state, '', `${location.pathname}${location.search}${rest ? `#${rest}` : ''}`)
  return token
}

/**
 * A `#token=…` link pasted into a tab already open is taken as at the first load (kept, and
 * removed from the address bar); `use` is given its token, to connect with it. Returns the
 * function that stops listening.
 */
export function followTokenLinks(use: (token: string) => void): () => void {
  const heard = () => {
    if (window.leasehold) return
    const token = takeTokenFromFragment()
    if (token) use(token)
  }
  window.addEventListener('hashchange', heard)
  return () => window.removeEventListener('hashchange', heard)
}

/** Keeps a token the operator typed in, as one from the link would be kept. */
export function storeToken(token: string): Connection {
  sessionStorage.setItem(TOKEN_KEY, token)
  return { apiBase: window.leasehold?.apiBase ?? location.origin, token }
}
