import { dirname } from 'node:path'
import type { ClaimWaiters } from '../workers/claim-waiters'
import type { ClockWaiters } from '../workers/clock-waiters'
import { longPollMs } from '../workers/long-poll'
import type { Engine, ExchangeAnswer } from '../engine'
import { answerError } from '../error-answer'
import { HttpError } from '../http/http-error'
import { exchangeAnswer } from '../http/views/worker'
import { acquireAnswer } from './worker-answers'
import { IPC_METHODS, type IpcRequest, type IpcResponse } from '../../src-shared/ipc-protocol'

export interface IpcHostDeps {
  engine: Engine
  waiters: ClaimWaiters
  clockWaiters: ClockWaiters
}

/**
 * Answers one request from a local worker: the same engine calls, with the same semantics, as
 * dialect 003's /batch and /api/files over HTTP. `workerId` is the process's own id: a worker cannot act
 * in another's name. `gone` aborts when the process exits, so a waiting claim never hands a
 * lease to a dead worker. An exchange that waits and is granted is also given to `answerEarly`
 * from the commit that grants it (see claim-waiters.ts `OnAnswer`): the same response the
 * promise settles with, so the caller sends whichever comes first, once.
 */
export async function answerWorkerRequest(
  deps: IpcHostDeps,
  workerId: string,
  request: IpcRequest,
  gone: AbortSignal,
  answerEarly?: (response: IpcResponse) => void,
): Promise<IpcResponse> {
  const early = answerEarly && ((result: unknown) => answerEarly({ type: 'response', id: request.id, result }))
  try {
    return { type: 'response', id: request.id, result: await dispatch(deps, workerId, request, gone, early) }
  } catch (error) {
    const { status, code, detail, internal } = answerError(error, dirname(deps.engine.databaseFile))
    // The worker is this host's own process: it logs a bug's message, where the host has no log.
    return { type: 'response', id: request.id, error: { status, code, detail: internal ? String((error as Error)?.message ?? error) : detail } }
  }
}

async function dispatch(deps: IpcHostDeps, workerId: string, request: IpcRequest, gone: AbortSignal, answerEarly?: (result: unknown) => void): Promise<unknown> {
  const { engine, waiters, clockWaiters } = deps
  const schema = IPC_METHODS[request.method]
  const parsed = schema.safeParse(request.params)
  if (!parsed.success) throw new HttpError('invalid_request', `${request.method}: ${parsed.error.issues[0]?.message ?? 'invalid'}`)
  const params = parsed.data as Record<string, unknown>
  if ('worker_id' in params && params.worker_id !== workerId) {
    throw new HttpError('worker_mismatch', `This process is ${workerId}, not ${String(params.worker_id)}`)
  }
  switch (request.method) {
    case 'exchange': {
      const request = { ...(params as (typeof IPC_METHODS)['exchange']['_output']), worker_id: workerId }
      let answered: unknown
      // (A process that dies ends its wait through `gone`: it is never answered early.)
      const onAnswer = (answer: ExchangeAnswer) => {
        answered = exchangeAnswer(request, answer)
        answerEarly!(answered)
      }
      const answer = await waiters.exchange(request, { maxWaitMs: longPollMs(request.claim?.max_wait_ms), signal: gone }, answerEarly && onAnswer)
      if (answered !== undefined) return answered
      if (answer.claimed.granted.length > 0 && gone.aborted) {
        // Granted in the instant the process died: give them straight back.
        await engine.run(() => engine.expireLeasesOfWorker(workerId))
        return { ...exchangeAnswer(request, answer), jobs: [] }
      }
      return exchangeAnswer(request, answer)
    }
    case 'acquireFile':
      return acquireAnswer(await engine.run(() => engine.acquireFile(params as (typeof IPC_METHODS)['acquireFile']['_output'])))
    case 'waitFileRetry': {
      const p = params as (typeof IPC_METHODS)['waitFileRetry']['_output']
      const retryAt = engine.fileRetryAt(p.file, p.owner_id)
      return retryAt === null || (await clockWaiters.waitUntil(retryAt, longPollMs(p.max_wait_ms), gone))
    }
    case 'heartbeatFile':
      await engine.run(() => engine.heartbeatFile(params as (typeof IPC_METHODS)['heartbeatFile']['_output']))
      return { ok: true }
    case 'report': {
      const p = params as (typeof IPC_METHODS)['report']['_output']
      await engine.run(() => engine.recordWorkerProblem(workerId, { kind: p.kind, detail: p.detail }))
      return { ok: true }
    }
  }
}
