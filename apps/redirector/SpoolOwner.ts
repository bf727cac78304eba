import { randomBytes } from "node:crypto"
import { isMainThread, threadId, workerData } from "node:worker_threads"

// Who may take a click spool's file (ClickSpool.ts): the files are named
// `<host>@<owner>@<order>@<round id>.clicks`, the owner part saying which process, which of its
// starts, and which of its threads wrote it.

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Files the spools of this thread hold: a file named with this thread's owner is an earlier
 * incarnation's (same pid after a restart in a container) unless a spool here holds it (the
 * tests, or apps/all, may run several redirectors in one thread).
 */
export const held = new Set<string>()

/**
 * Marks this process's start, shared by its threads (apps/redirector/Threads.ts hands the main
 * thread's to its workers): a file of this pid with another mark is a dead incarnation's.
 */
export const spoolIncarnation: string =
  !isMainThread && typeof workerData?.spoolIncarnation === "string"
    ? workerData.spoolIncarnation
    : randomBytes(4).toString("hex")
/** The owner part of a file name: `<pid>.<incarnation>.<thread id>` (older files: `<pid>`). */
export const SPOOL_OWNER = `${process.pid}.${spoolIncarnation}.${threadId}`

/** Whether the owner of a spool file may still be writing it, so that it must not be taken. */
export const ownerAlive = (owner: string, file: string) => {
  const [pid, incarnation, thread] = owner.split(".")
  if (Number(pid) !== process.pid) return isAlive(Number(pid))
  // A sibling thread lives as long as this process (a thread that dies ends the process).
  if (incarnation === spoolIncarnation && Number(thread) !== threadId) return true
  return held.has(file)
}
