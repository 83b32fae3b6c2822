/**
 * A revision as an HTTP entity-tag (RFC 9110 8.8.3): the number in quotes, a strong tag. The host
 * answers a schedule's revision so in `ETag`, and its clients (the command line, the dashboard)
 * send it so in `If-Match`.
 */
export const entityTag = (revision: number): string => `"${revision}"`
