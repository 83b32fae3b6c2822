import { BroadcastChannel } from 'node:worker_threads'
import { endGroups, groupsOfChildren, type ProcessGroup } from '../src-shared/process-groups'
import type { ExecGroupNotice } from '../src-shared/ipc-protocol'

/**
 * The process groups of the `exec` programs running in this worker, told by the handler threads
 * that start them to the worker's own thread. A worker that dies cannot end them: its host,
 * told of each group in turn, ends those left when the worker exits, and a worker whose host
 * is gone ends its own before it exits (docs/workers.md, "Stopping a job's programs").
 */
const CHANNEL = 'leasehold:exec-groups'

let announcer: BroadcastChannel | null = null

/** Tells the worker's thread of a group started or ended (from any of its threads). */
export function announceGroup(notice: ExecGroupNotice): void {
  if (!announcer) {
    announcer = new BroadcastChannel(CHANNEL)
    announcer.unref()
  }
  announcer.postMessage(notice)
}

/** In the worker's own thread: the groups running now, each notice passed on to `forward` (the host). */
export class ExecGroupWatch {
  private readonly groups = new Map<number, ProcessGroup>()
  private readonly channel = new BroadcastChannel(CHANNEL)

  constructor(forward: (notice: ExecGroupNotice) => void) {
    this.channel.unref()
    this.channel.onmessage = (event) => {
      const notice = (event as { data: ExecGroupNotice }).data
      if (notice.type === 'exec_started') this.groups.set(notice.pgid, { pgid: notice.pgid, started: notice.started })
      else this.groups.delete(notice.pgid)
      forward(notice)
    }
  }

  /**
   * Ends every group still running, each only while it is still the one started: those told of,
   * and those this process's children lead, a program started moments before (its notice may
   * still be on its way from its thread when the host goes, as when the worker was stopped).
   */
  endAll(): Promise<void> {
    const groups = new Map(this.groups)
    for (const group of groupsOfChildren()) groups.set(group.pgid, group)
    return endGroups(groups.values())
  }
}
