/**
 * Names the host keeps whole — job types, add-on ids, queues — may begin or end with spaces, and
 * the host matches them whole: " padded " and "padded" are two types. The page never trims one
 * (a name from the host goes back as it came, a typed one as typed); it shows the spaces instead,
 * since a browser collapses them.
 */

/** A name cut around its outer whitespace: `lead` + `core` + `trail` is the name. */
export interface NameParts {
  lead: string
  core: string
  trail: string
}

export function nameParts(name: string): NameParts {
  const lead = /^\s*/.exec(name)![0]
  const rest = name.slice(lead.length)
  const trail = /\s*$/.exec(rest)![0]
  return { lead, core: rest.slice(0, rest.length - trail.length), trail }
}

const spaces = (run: string) => (run.length === 1 ? 'a space' : `${run.length} spaces`)

/** What is easy to miss about a name's outer spaces, in words ("begins with a space", "is only 2 spaces"); null when it has none. */
export function outerSpaces(name: string): string | null {
  const { lead, core, trail } = nameParts(name)
  if (core === '' && name !== '') return `is only ${spaces(name)}`
  const parts = [lead && `begins with ${spaces(lead)}`, trail && `ends with ${spaces(trail)}`].filter(Boolean)
  return parts.length > 0 ? parts.join(' and ') : null
}

/** A name in running text: quoted when its outer spaces would otherwise be lost (`" padded "`). */
export const quotedName = (name: string): string => (outerSpaces(name) === null ? name : JSON.stringify(name))
