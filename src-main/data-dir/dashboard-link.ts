/**
 * The address a command or a browser on this machine reaches the host at: a host bound to every
 * interface (0.0.0.0, ::) is reached on this machine's loopback, a name its Host check accepts
 * (a request that names 0.0.0.0 is refused as a foreign host). host.json holds this address.
 */
export function localUrl(url: string): string {
  const local = new URL(url)
  if (local.hostname === '0.0.0.0') local.hostname = '127.0.0.1'
  if (local.hostname === '[::]') local.hostname = '[::1]'
  return local.origin
}

/**
 * The dashboard's address with the token in its fragment, which the page moves into the tab's
 * session storage and out of the address bar (a fragment is never sent to a server).
 */
export function dashboardLink(url: string, token: string): string {
  const link = new URL(localUrl(url))
  link.hash = `token=${encodeURIComponent(token)}`
  return link.toString()
}
