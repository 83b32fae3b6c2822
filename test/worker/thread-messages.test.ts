/**
 * How the worker's threads talk, without threads: messages gathered per turn into one batch
 * (MessageBatch), and which thread runs each job of a batch (placeBatch, RunTimes).
 */
import { describe, expect, test } from 'vitest'
import { MessageBatch } from '../../src-worker/thread-protocol'
import { placeBatch, RunTimes, SHORT_RUN_MS } from '../../src-worker/thread-placement'

const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

describe('MessageBatch', () => {
  test('messages sent in one turn are posted together, in order, once the turn ends; the next turn’s go in another batch', async () => {
    const posted: number[][] = []
    const batch = new MessageBatch<number>((messages) => posted.push(messages), setImmediate)
    batch.send(1)
    batch.send(2)
    batch.send(3)
    expect(posted).toEqual([])
    await nextTurn()
    expect(posted).toEqual([[1, 2, 3]])
    batch.send(4)
    await nextTurn()
    await nextTurn()
    expect(posted).toEqual([[1, 2, 3], [4]])
  })

  test('a turn with nothing to send posts nothing', async () => {
    const posted: number[][] = []
    const batch = new MessageBatch<number>((messages) => posted.push(messages), queueMicrotask)
    batch.flush()
    await nextTurn()
    expect(posted).toEqual([])
  })

  test('a batch held open past its age by a turn that does not end goes with the next message, at once', () => {
    const posted: string[][] = []
    const batch = new MessageBatch<string>((messages) => posted.push(messages), setImmediate, 5)
    batch.send('progress 0.1')
    const since = performance.now()
    while (performance.now() - since < 6) {
      // a handler computing without yielding
    }
    batch.send('progress 0.2')
    expect(posted).toEqual([['progress 0.1', 'progress 0.2']])
  })

  test('touch makes a batch go with nothing sent, and what the poster adds goes in it', async () => {
    const posted: string[][] = []
    let kept: string[] = []
    const batch = new MessageBatch<string>((messages) => {
      posted.push([...messages, ...kept])
      kept = []
    }, setImmediate)
    kept.push('progress of run 1')
    batch.touch()
    batch.send('log of run 2')
    await nextTurn()
    expect(posted).toEqual([['log of run 2', 'progress of run 1']])
  })
})

describe('placeBatch: which thread runs each job of a batch', () => {
  const short = (type: string) => type === 'noop'

  test('the short jobs of a batch all go to the thread least loaded when the first of them is placed', () => {
    expect(placeBatch(Array(16).fill('noop'), [3, 1, 2, 1], short)).toEqual(Array(16).fill(1))
  })

  test('jobs that may compute go one by one to the least-loaded thread, so they spread', () => {
    expect(placeBatch(['render', 'render', 'render', 'render', 'render'], [0, 0, 0, 0], short)).toEqual([0, 1, 2, 3, 0])
    expect(placeBatch(['render', 'render', 'render'], [2, 0, 1, 0], short)).toEqual([1, 3, 1])
  })

  test('in a mixed batch the short jobs keep to their one thread and the others spread around it', () => {
    expect(placeBatch(['noop', 'render', 'noop', 'render', 'noop'], [0, 0], short)).toEqual([0, 1, 0, 1, 0])
  })
})

describe('RunTimes: whether a job type is short', () => {
  test('a type not seen yet is not short; one whose runs end within SHORT_RUN_MS is', () => {
    const times = new RunTimes()
    expect(times.isShort('noop')).toBe(false)
    times.learn('noop', 1)
    expect(times.isShort('noop')).toBe(true)
    times.learn('render', SHORT_RUN_MS)
    expect(times.isShort('render')).toBe(false)
  })

  test('a long run makes a short type long, and it becomes short again after a run of short ones', () => {
    const times = new RunTimes()
    for (let i = 0; i < 10; i++) times.learn('mixed', 1)
    times.learn('mixed', 5_000)
    expect(times.isShort('mixed')).toBe(false)
    let runs = 0
    while (!times.isShort('mixed')) {
      times.learn('mixed', 1)
      runs++
    }
    expect(runs).toBeGreaterThan(5)
    expect(runs).toBeLessThan(40)
  })
})
