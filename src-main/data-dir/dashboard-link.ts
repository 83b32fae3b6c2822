/**
 * The dashboard's address with the token in its fragment, which the page moves into the tab's
 * session storage and out of the address bar (a fragment is never sent to a server). A host
 * bound to every interface is opened on this machine's loopback, a name its Host check accepts.
 */
export function dashboardLink(url: string, token: string): string {
  const link = new URL(url)
  if (link.hostname === '0.0.0.0') link.hostname = '127.0.0.1'
  if (link.hostname === '[::]') link.hostname = '[::1]'
  link.hash = `token=${encodeURIComponent(token)}`
  return link.toString()
}
