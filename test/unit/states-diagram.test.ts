import { readFileSync } from 'node:fs'
import { expect, test } from 'vitest'
import { JOB_STATES, JOB_TRANSITIONS } from '../../src-main/engine/rules/states'

test('the state diagram in docs/states.md draws exactly the transition table', () => {
  const doc = readFileSync(new URL('../../docs/states.md', import.meta.url), 'utf8')
  const mermaid = /```mermaid\n([\s\S]*?)```/.exec(doc)![1]!
  const drawn = new Set<string>()
  for (const match of mermaid.matchAll(/^\s*(\w+) --> (\w+)/gm)) {
    if (match[1] !== '[*]' && JOB_STATES.includes(match[1] as never) && JOB_STATES.includes(match[2] as never)) {
      drawn.add(`${match[1]} -> ${match[2]}`)
    }
  }
  const table = new Set(JOB_STATES.flatMap((from) => JOB_TRANSITIONS[from].map((to) => `${from} -> ${to}`)))
  expect([...drawn].sort()).toEqual([...table].sort())
})
