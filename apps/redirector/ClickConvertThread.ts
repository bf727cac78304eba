import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import { Data, Effect, type Scope } from "effect"
import { workerBootCode } from "../../infra/Workers.js"
import { ClickConverter, type ConvertOptions, type EventChunk } from "./ClickConvert.js"
import { type RoundData, transferables } from "./ClickRound.js"

const ROLE = "click-convert"

/**
 * Whether this thread is a click conversion thread. In a bundle (scripts/bundle.mjs) the
 * thread runs the whole bundle: its entry must then start nothing (Threads.ts checks).
 */
export const isConversionThread: boolean = !isMainThread && workerData?.role === ROLE

type Request = {
  readonly seq: number
  readonly round: RoundData
  readonly secrets: ReadonlyMap<number, Uint8Array>
  readonly occurredAt: string
}
type Reply =
  | { readonly seq: number; readonly chunks: Array<EventChunk> }
  | { readonly seq: number; readonly error: string }

/** The conversion failed in its thread (a defect there), or the thread ended: the round stays in line. */
export class ClickConversionError extends Data.TaggedError("ClickConversionError")<{ readonly message: string }> {}

export interface ConversionThread {
  /** A round's events (ClickConverter.convert), made in the thread; the round's data is handed over, not copied. */
  readonly convert: (
    round: RoundData,
    secrets: ReadonlyMap<number, Uint8Array>,
    occurredAt: string
  ) => Effect.Effect<Array<EventChunk>, ClickConversionError>
  /** The thread's worker, while one runs (for tests). */
  readonly worker: () => Worker | undefined
}

/**
 * Click capture's conversion off the request path: a worker thread that turns each round into
 * its clicks.recorded events (the user agents parsed, the visitors hashed, the JSON written),
 * so the main thread keeps only the recording, the spool and the publish. One round at a time,
 * in order. A thread that ends (it should not) fails what it was converting, and the next
 * round starts a new one. Stopped with the scope.
 */
export const startConversionThread = (options: ConvertOptions): Effect.Effect<ConversionThread, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      let worker: Worker | undefined
      let seq = 0
      const pending = new Map<number, (reply: Reply) => void>()
      const settle = (reply: Reply) => {
        const done = pending.get(reply.seq)
        pending.delete(reply.seq)
        // Idle, the thread does not keep the process alive.
        if (pending.size === 0) worker?.unref()
        done?.(reply)
      }
      const spawn = () => {
        const w = new Worker(workerBootCode(import.meta.url), { eval: true, workerData: { role: ROLE, options } })
        let failure = ""
        w.on("message", settle)
        w.on("error", (e) => (failure = `: ${e instanceof Error ? e.message : String(e)}`))
        w.on("exit", (code) => {
          if (worker === w) worker = undefined
          for (const s of [...pending.keys()]) {
            settle({ seq: s, error: `the click conversion thread ended (code ${code})${failure}` })
          }
        })
        w.unref()
        return w
      }
      worker = spawn()
      const thread: ConversionThread = {
        convert: (round, secrets, occurredAt) =>
          Effect.async<Array<EventChunk>, ClickConversionError>((resume) => {
            worker ??= spawn()
            const s = ++seq
            pending.set(s, (reply) =>
              resume(
                "error" in reply
                  ? Effect.fail(new ClickConversionError({ message: reply.error }))
                  : Effect.succeed(reply.chunks)
              )
            )
            worker.ref()
            worker.postMessage({ seq: s, round, secrets, occurredAt } satisfies Request, transferables(round))
            return Effect.sync(() => {
              pending.delete(s)
              if (pending.size === 0) worker?.unref()
            })
          }),
        worker: () => worker
      }
      return { thread, stop: () => worker?.terminate() }
    }),
    ({ stop }) => Effect.promise(async () => void (await stop()))
  ).pipe(Effect.map(({ thread }) => thread))

/** The thread's side: converts each round it is sent, in order, and answers with its events. */
const serve = () => {
  const port = parentPort!
  const converter = new ClickConverter(workerData.options as ConvertOptions)
  port.on("message", (request: Request) => {
    let reply: Reply
    try {
      reply = { seq: request.seq, chunks: converter.convert(request.round, request.secrets, request.occurredAt) }
    } catch (error) {
      reply = { seq: request.seq, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }
    }
    port.postMessage(reply)
  })
}

if (isConversionThread) serve()
