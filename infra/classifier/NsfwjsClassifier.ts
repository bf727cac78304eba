/**
 * IMAGE_CLASSIFIER=nsfwjs (the default): the nsfwjs model that ships inside its npm package,
 * on TensorFlow.js with the WASM backend, in one child process (NsfwjsProcess.ts) started
 * under `nice` like the image converters: inference only gets CPU the redirector and the API
 * leave idle, and a stuck or crashed inference takes down only that child. The model is
 * loaded once and kept warm; images are classified one at a time, each under a time guard
 * (a child past it is killed and started again for the next image), with a bounded number
 * of images waiting (past it classify fails at once with "busy").
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { ratingOf, usableScores } from "../../domain/Classification.js"
import { type Classification, ClassifierError, type ClassifierShape } from "../../domain/ports/Classifier.js"
import { nicedNodeCommand, rssOf } from "../Processes.js"
import type { ClassifyReply, ClassifyRequest, NsfwjsModel, StartMessage } from "./NsfwjsProcess.js"

export const NSFWJS_MODELS: ReadonlyArray<NsfwjsModel> = ["MobileNetV2", "MobileNetV2Mid", "InceptionV3"]
export type { NsfwjsModel } from "./NsfwjsProcess.js"

export interface NsfwjsOptions {
  /** MobileNetV2Mid: nsfwjs's 93 % model, about as fast as MobileNetV2 on the WASM backend. */
  readonly model: NsfwjsModel
  /** OS niceness of the child (0 to 19). */
  readonly nice: number
  /** Time for one image (decoding and inference), not counting a model load. */
  readonly timeoutSeconds: number
  /** Time for the child to start and load the model. */
  readonly startTimeoutSeconds: number
  /** Images that may wait for the child; past it classify fails at once. */
  readonly maxQueue: number
}

export const defaultNsfwjsOptions: NsfwjsOptions = {
  model: "MobileNetV2Mid",
  nice: 10,
  timeoutSeconds: 30,
  startTimeoutSeconds: 120,
  maxQueue: 64
}

const MiB = 1024 * 1024
/** A child whose resident memory grew past this is restarted after its answer. */
const RECYCLE_RSS = 1024 * MiB

const entry = fileURLToPath(new URL("./NsfwjsProcess.ts", import.meta.url))

const childCommand = (nice: number) => nicedNodeCommand(entry, nice, 512)

const fail = (message: string, cause?: unknown) => new ClassifierError({ message: `nsfwjs: ${message}`, cause })

/**
 * Starts the child and waits for its model to load; `onLoaded` hears of the child before the
 * answer, so the caller holds it even if interrupted right after. Interruption kills it.
 */
const spawnModelProcess = (options: NsfwjsOptions, onLoaded: (c: ChildProcess) => void) =>
  Effect.async<ChildProcess, ClassifierError>((resume) => {
    const [command, args] = childCommand(options.nice)
    const c = spawn(command, args, {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      serialization: "advanced",
      env: { ...process.env, NSFWJS_MODEL: options.model, UV_THREADPOOL_SIZE: "2", VIPS_WARNING: "0" }
    })
    const done = (result: Effect.Effect<ChildProcess, ClassifierError>) => {
      clearTimeout(timer)
      c.off("message", onMessage).off("exit", onExit).off("error", onError)
      resume(result)
    }
    const unavailable = (why: string) => {
      c.kill("SIGKILL")
      done(Effect.fail(fail(why)))
    }
    const onMessage = (m: StartMessage) => {
      if (m.type === "failed") return unavailable(`the model did not load: ${m.message}`)
      onLoaded(c)
      done(
        Effect.as(
          Effect.logInfo(
            `image classifier: nsfwjs ${options.model} on TensorFlow.js ${m.backend} loaded in ${m.loadMs} ms ` +
              `(child process at nice ${options.nice})`
          ),
          c
        )
      )
    }
    const onExit = (code: number | null, signal: string | null) =>
      unavailable(`the classifier process exited at start (${signal ?? code})`)
    const onError = (e: Error) => unavailable(`the classifier process could not start: ${e.message}`)
    const timer = setTimeout(
      () => unavailable(`the model did not load within ${options.startTimeoutSeconds} s`),
      options.startTimeoutSeconds * 1000
    )
    c.on("message", onMessage).on("exit", onExit).on("error", onError)
    return Effect.sync(() => {
      clearTimeout(timer)
      c.kill("SIGKILL")
    })
  })

/**
 * One image to the child and its answer, under the time guard. `onBroken` hears of a child
 * that died, timed out, could not take the image or was left mid-inference by interruption.
 */
const askModelProcess = (c: ChildProcess, request: ClassifyRequest, timeoutSeconds: number, onBroken: () => void) =>
  Effect.async<Extract<ClassifyReply, { ok: true }>, ClassifierError>((resume) => {
    let settled = false
    const settle = (result: Effect.Effect<Extract<ClassifyReply, { ok: true }>, ClassifierError>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      c.off("message", onMessage).off("exit", onExit)
      resume(result)
    }
    const onMessage = (m: ClassifyReply) => {
      if (typeof m !== "object" || m === null || m.id !== request.id) return
      settle(m.ok ? Effect.succeed(m) : Effect.fail(fail(`the image could not be classified: ${m.message}`)))
    }
    const onExit = (code: number | null, signal: string | null) => {
      onBroken()
      settle(Effect.fail(fail(`the classifier process died (${signal ?? code})`)))
    }
    const timer = setTimeout(() => {
      onBroken()
      settle(Effect.fail(fail(`no answer within ${timeoutSeconds} s; the classifier process was stopped`)))
    }, timeoutSeconds * 1000)
    c.on("message", onMessage).on("exit", onExit)
    c.send(request, (e) => {
      if (e) {
        onBroken()
        settle(Effect.fail(fail(`could not hand the image to the classifier process: ${e.message}`)))
      }
    })
    // Interrupted: the answer would come for nobody; the child may be mid-inference.
    return Effect.sync(() => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      c.off("message", onMessage).off("exit", onExit)
      onBroken()
    })
  })

export const makeNsfwjsClassifier = (options: NsfwjsOptions) =>
  Effect.gen(function* () {
    let child: ChildProcess | null = null
    let seq = 0
    let waiting = 0
    const lock = yield* Effect.makeSemaphore(1)

    const alive = (c: ChildProcess | null): c is ChildProcess =>
      c !== null && c.exitCode === null && c.signalCode === null && c.connected

    const stop = () => {
      child?.kill("SIGKILL")
      child = null
    }
    yield* Effect.addFinalizer(() => Effect.sync(stop))

    const start: Effect.Effect<ChildProcess, ClassifierError> = Effect.suspend(() => {
      if (alive(child)) return Effect.succeed(child)
      stop()
      return spawnModelProcess(options, (c) => {
        child = c
      })
    })

    const ask = (c: ChildProcess, request: ClassifyRequest) =>
      askModelProcess(c, request, options.timeoutSeconds, () => {
        if (child === c) stop()
      })

    const recycleIfBloated = Effect.suspend(() => {
      const pid = child?.pid
      if (pid === undefined) return Effect.void
      return Effect.promise(() => rssOf(pid)).pipe(
        Effect.map((rss) => (rss !== null && rss > RECYCLE_RSS ? stop() : undefined))
      )
    })

    const run = (bytes: Uint8Array) =>
      Effect.gen(function* () {
        const c = yield* start
        const reply = yield* ask(c, { id: ++seq, bytes })
        yield* recycleIfBloated
        const scores = usableScores(reply.scores)
        if (scores === undefined) return yield* fail(`unusable scores ${JSON.stringify(reply.scores)}`)
        yield* Effect.logDebug(
          `image classifier: decoded in ${reply.decodeMs.toFixed(1)} ms, inferred in ${reply.inferMs.toFixed(1)} ms`
        )
        return { rating: ratingOf(scores), scores } satisfies Classification
      })

    const classify = Effect.fn("Classifier.classify")(function* (bytes: Uint8Array) {
      if (waiting >= options.maxQueue) {
        return yield* fail(`busy: ${waiting} image(s) already waiting`)
      }
      waiting++
      return yield* lock
        .withPermits(1)(run(bytes))
        .pipe(
          Effect.ensuring(
            Effect.sync(() => {
              waiting--
            })
          )
        )
    })

    /** Loads the model now (in the background of the caller's choice) instead of on the first image. */
    const warmUp = lock.withPermits(1)(start).pipe(Effect.asVoid)

    return {
      classifier: { name: "nsfwjs", enabled: true, classify } satisfies ClassifierShape,
      warmUp
    }
  })
