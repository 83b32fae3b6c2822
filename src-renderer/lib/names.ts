/**
 * Names the host keeps whole — job types, add-on ids, queues — may begin or end with spaces, and
 * the host matches them whole: " padded " and "padded" are two types. The page never trims one
 * (a name from the host goes back as it came, a typed one as typed); it shows the spaces instead,
 * since a browser collapses them. A name or a path may also hold characters that draw nothing or
 * reorder the text around them: the page writes those as escapes.
 */

import { escapedChar, INVISIBLE_CHARS, printable } from '../../src-shared/printable'

/** Outer spaces: whitespace that is not an invisible character (a newline or tab around a name is written as its escape). */
const LEADING_SPACES = new RegExp(`^(?:(?!${INVISIBLE_CHARS.source})\\s)*`)
const TRAILING_SPACES = new RegExp(`(?:(?!${INVISIBLE_CHARS.source})\\s)*$`)

/** A name cut around its outer whitespace: `lead` + `core` + `trail` is the name. */
export interface NameParts {
  lead: string
  core: string
  trail: string
}

export function nameParts(name: string): NameParts {
  const lead = LEADING_SPACES.exec(name)![0]
  const rest = name.slice(lead.length)
  const trail = TRAILING_SPACES.exec(rest)![0]
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

const INVISIBLE_CHAR = new RegExp(INVISIBLE_CHARS.source)

/** A piece of text as the page draws it: as it is, or an invisible character written as its escape. */
export interface TextPiece {
  text: string
  invisible: boolean
}

/**
 * Text from the host cut into what is drawn as it is and the invisible characters, each written
 * as its escape (`\u202e`), so that none can reorder or hide what is around it. `keep` holds the
 * characters drawn as they are all the same (a newline in a multi-line error).
 */
export function textPieces(text: string, keep = ''): TextPiece[] {
  const pieces: TextPiece[] = []
  let plain = ''
  for (const char of text) {
    if (!INVISIBLE_CHAR.test(char) || keep.includes(char)) {
      plain += char
      continue
    }
    if (plain) pieces.push({ text: plain, invisible: false })
    plain = ''
    pieces.push({ text: escapedChar(char), invisible: true })
  }
  if (plain) pieces.push({ text: plain, invisible: false })
  return pieces
}

/** What is easy to miss about a name's invisible characters, in words ("holds invisible characters: \u202e, \u202d"); null when it has none. */
export function invisibleCharacters(name: string): string | null {
  const found = [...new Set(name.match(INVISIBLE_CHARS) ?? [])].map(escapedChar)
  return found.length === 0 ? null : `holds ${found.length === 1 ? 'an invisible character' : 'invisible characters'}: ${found.join(', ')}`
}

/** What is easy to miss about a name in words: its outer spaces and its invisible characters; null when nothing is. */
export function nameNote(name: string): string | null {
  const notes = [outerSpaces(name), invisibleCharacters(name)].filter((note) => note !== null)
  return notes.length === 0 ? null : notes.join('; ')
}

/** Text from the host where no markup can go (a title): its invisible characters written as escapes (`\u202e`), the rest as it is. */
export const withEscapes = printable

/**
 * A name in running text (a question, a title, a label): quoted, its invisible characters
 * written as escapes, when its outer spaces would otherwise be lost or it holds such characters
 * (`" padded "`, `"\u202eevil"`); as it is otherwise.
 */
export const quotedName = (name: string): string => (nameNote(name) === null ? name : withEscapes(JSON.stringify(name)))
