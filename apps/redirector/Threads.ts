import type { AddressInfo } from "node:net"
import * as net from "node:net"
import { isMainThread, parentPort, threadId, Worker } from "node:worker_threads"
import { Cause, Config, Deferred, Effect, Exit, FiberId, Layer, Scope } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { failureLine, LoggingLive, runMain } from "../../infra/Main.js"
import { listenFailed, StartupError } from "../../infra/StartupError.js"
import { reusePortConfig } from "./Redirector.js"
import { spoolIncarnation } from "./SpoolOwner.js"

/**
 * REDIRECTOR_THREADS: how many worker threads of one process serve SHORT_PORT, each a whole
 * redirector (its own slug table following links.v1, its own click capture and spool). 1 (the
 * default): no worker thread, the main thread is the redirector.
 */
export const redirectorThreadsConfig = Config.integer("REDIRECTOR_THREADS").pipe(
  Config.validate({ message: "must be a whole number from 1 to 64", validation: (n) => n >= 1 && n <= 64 }),
  Config.withDefault(1)
)

/** What a thread tells the main thread: its table is loaded, or why it could not start. */
type ThreadMessage = { readonly type: "ready" } | { readonly type: "failed"; readonly line: string }
const STOP = "stop"

/** How long a stopping thread may take (its clicks flushed, its spool closed) before it is cut. */
const STOP_TIMEOUT = "60 seconds"

interface Thread {
  readonly worker: Worker
  readonly ready: Deferred.Deferred<void, StartupError>
  readonly exited: Deferred.Deferred<number>
}

/**
 * A worker thread runs the entry module again (`main.ts`, which then takes the worker's path
 * below). tsx hooks only the main thread on Node 20: a thread running TypeScript registers it
 * first.
 */
const bootCode = (entry: string) =>
  entry.endsWith(".ts")
    ? `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))})` +
      `.then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}) })`
    : `import(${JSON.stringify(entry)})`

const startThread = (index: number, entry: string, env: NodeJS.ProcessEnv): Thread => {
  const worker = new Worker(bootCode(entry), { eval: true, env, workerData: { spoolIncarnation } })
  const ready = Deferred.unsafeMake<void, StartupError>(FiberId.none)
  const exited = Deferred.unsafeMake<number>(FiberId.none)
  let error = ""
  worker.on("message", (m: ThreadMessage) => {
    if (m.type === "ready") Deferred.unsafeDone(ready, Exit.void)
    else Deferred.unsafeDone(ready, Exit.fail(new StartupError({ message: m.line.replace(/^start-up failed: /, "") })))
  })
  worker.on("error", (e) => (error = `: ${e instanceof Error ? e.message : String(e)}`))
  worker.on("exit", (code) => {
    Deferred.unsafeDone(exited, Exit.succeed(code))
    const message = `redirector thread ${index} exited during start-up (code ${code})${error}`
    Deferred.unsafeDone(ready, Exit.fail(new StartupError({ message })))
  })
  return { worker, ready, exited }
}

/** Asks every thread still running to stop, and waits for each to end (cut after STOP_TIMEOUT). */
const stopThreads = (threads: ReadonlyArray<Thread>) =>
  Effect.forEach(
    threads,
    (t) =>
      Effect.flatMap(Deferred.isDone(t.exited), (done) => {
        if (done) return Effect.void
        t.worker.postMessage(STOP)
        return Deferred.await(t.exited).pipe(
          Effect.timeout(STOP_TIMEOUT),
          Effect.catchAll(() =>
            Effect.logError("a redirector thread did not stop in time; cutting it").pipe(
              Effect.zipRight(Effect.promise(() => t.worker.terminate()))
            )
          )
        )
      }),
    { concurrency: "unbounded", discard: true }
  )

/**
 * Binds the port for a moment (not shared): says at start that it is in use, the way a
 * redirector of its own would, and turns SHORT_PORT=0 into one port for every thread.
 */
const checkPort = (port: number) =>
  Effect.async<number, StartupError>((resume) => {
    const server = net.createServer()
    server.once("error", (e) => resume(Effect.fail(listenFailed("SHORT_PORT", port)(e))))
    server.listen({ host: "0.0.0.0", port, exclusive: true }, () => {
      const bound = (server.address() as AddressInfo).port
      server.close(() => resume(Effect.succeed(bound)))
    })
  })

/**
 * The main thread of REDIRECTOR_THREADS=n: starts n threads sharing SHORT_PORT, is ready once
 * every one has loaded its table, and on SIGTERM/SIGINT (signals reach only the main thread)
 * stops each one (its listener closed, its clicks flushed, its spool closed) before the
 * process says "stopped". A thread that ends on its own fails the process (exit code 1): the
 * supervisor restarts it and the next start publishes what the spools hold.
 */
const threadsLive = (n: number, entry: string) =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const config = yield* AppConfig
      const shared = yield* reusePortConfig
      const port = shared && config.shortPort !== 0 ? config.shortPort : yield* checkPort(config.shortPort)
      // The threads share the port with each other (and with other processes only when
      // REDIRECTOR_REUSE_PORT says so: checked above).
      const env = { ...process.env, SHORT_PORT: String(port), REDIRECTOR_REUSE_PORT: "1" }
      const threads = yield* Effect.acquireRelease(
        Effect.sync(() => Array.from({ length: n }, (_, i) => startThread(i + 1, entry, env))),
        stopThreads
      )
      yield* Effect.forEach(threads, (t) => Deferred.await(t.ready), { concurrency: "unbounded", discard: true })
      yield* Effect.logInfo(`redirector ready: ${n} threads on 0.0.0.0:${port}, each with its slug table loaded`)
      const [code, index] = yield* Effect.raceAll(
        threads.map((t, i) => Deferred.await(t.exited).pipe(Effect.map((c) => [c, i + 1] as const)))
      )
      return yield* Effect.dieMessage(
        `redirector thread ${index} ended on its own (code ${code}): stopping the process`
      )
    })
  )

/**
 * A worker thread: builds the redirector, says it is ready (or the one line why not), runs
 * until the main thread says stop, then closes it and ends.
 */
const runThread = <E>(app: Layer.Layer<never, E>) => {
  const port = parentPort!
  const stop = Deferred.unsafeMake<void>(FiberId.none)
  port.on("message", (m) => m === STOP && Deferred.unsafeDone(stop, Exit.void))
  const program = Effect.gen(function* () {
    const scope = yield* Scope.make()
    const built = yield* Effect.exit(Layer.buildWithScope(app, scope))
    if (Exit.isFailure(built)) {
      yield* Scope.close(scope, built)
      const line = failureLine(built.cause) ?? `start-up failed: ${Cause.pretty(built.cause)}`
      port.postMessage({ type: "failed", line } satisfies ThreadMessage)
      return 1
    }
    port.postMessage({ type: "ready" } satisfies ThreadMessage)
    yield* Deferred.await(stop)
    yield* Scope.close(scope, Exit.void)
    return 0
  }).pipe(Effect.annotateLogs("thread", threadId), Effect.provide(LoggingLive))
  void Effect.runPromise(program).then((code) => {
    process.exitCode = code
    port.close()
    // Nothing should keep the thread's loop alive now; if something does, it is cut.
    setTimeout(() => process.exit(code), 5_000).unref()
  })
}

/**
 * Runs the redirector: in the main thread with REDIRECTOR_THREADS=1, in n worker threads (the
 * main thread only starting and stopping them) otherwise. `settings` reads and checks every
 * setting; `entry` is the module that calls this (`import.meta.url` of main.ts).
 */
export const runRedirector = <E, E2>(
  app: Layer.Layer<never, E>,
  settings: Layer.Layer<AppConfig, E2>,
  entry: string
) => {
  if (!isMainThread) return runThread(app)
  runMain(
    Layer.unwrapEffect(
      Effect.map(
        redirectorThreadsConfig,
        (n): Layer.Layer<never, unknown> => (n === 1 ? app : threadsLive(n, entry).pipe(Layer.provide(settings)))
      )
    )
  )
}
