/**
 * The sharp adapter of the image codec port (domain/ports/Codec.ts).
 *
 * `probe` reads only headers, in this process. `convert` does the decoding and encoding in
 * a small pool of converter child processes (ConverterProcess.ts) started under `nice`, so
 * that a conversion only gets CPU the redirector and the API leave idle (measured in
 * bench/images-codec.ts --isolation), a crash or an out-of-memory kill on a hostile file
 * takes down only that child, and a conversion can be stopped at once: sharp's own timeout
 * cannot interrupt libwebp's encoder, a SIGKILL can. Each child runs one conversion at a
 * time with one libvips thread; the pool size bounds concurrent conversions.
 */
import { type ChildProcess, spawn } from "node:child_process"
import os from "node:os"
import { fileURLToPath } from "node:url"
import { Config, type Duration, Effect, Layer, Pool } from "effect"
import { limitViolation, mimeTypeOf, publishedFormat } from "../../domain/ImageFormat.js"
import {
  Codec,
  CodecUnavailable,
  ConversionMemoryExceeded,
  ConversionTimeout,
  type ConvertError,
  type ConvertedImage,
  CorruptImage,
  EncodeFailed,
  type ImageInfo,
  NotAnImage,
  type ProbeError,
  type Tier,
  TooManyFrames,
  TooManyPixels
} from "../../domain/ports/Codec.js"
import { nicedNodeCommand, rssOf } from "../Processes.js"
import type { ConvertReply, ConvertRequest } from "./ConverterProcess.js"
import { estimateMemory, type Failure, type Probe, planFor, probeImage } from "./Pipeline.js"

export interface CodecOptions {
  /** Conversions at once, one child process each. */
  readonly concurrency: number
  /** OS niceness of the converter processes (0 to 19; 0 runs them at the service's priority). */
  readonly nice: number
  /** Time for one conversion at the normal tier; the fast tier gets twice as much. */
  readonly timeoutSeconds: number
  /** Resident memory a converter process may reach; conversions estimated above it are refused. */
  readonly memoryLimitBytes: number
  /** An idle converter process is stopped after this. */
  readonly idleTimeToLive: Duration.DurationInput
}

const MiB = 1024 * 1024

export const defaultCodecOptions = (): CodecOptions => ({
  concurrency: os.availableParallelism() <= 2 ? 1 : Math.floor(os.availableParallelism() / 2),
  nice: 10,
  timeoutSeconds: 60,
  memoryLimitBytes: 3072 * MiB,
  idleTimeToLive: "5 minutes"
})

const failureToError = (failure: Failure): ConvertError => {
  switch (failure._tag) {
    case "NotAnImage":
      return new NotAnImage({ message: failure.message })
    case "CorruptImage":
      return new CorruptImage({ message: failure.message })
    case "TooManyPixels":
      return new TooManyPixels({ message: failure.message })
    case "TooManyFrames":
      return new TooManyFrames({ message: failure.message })
    case "ConversionTimeout":
      return new ConversionTimeout({ message: failure.message })
    case "EncodeFailed":
      return new EncodeFailed({ message: failure.message })
  }
}

const probeEffect = (bytes: Uint8Array): Effect.Effect<Probe, ProbeError> =>
  Effect.promise(() => probeImage(bytes)).pipe(
    Effect.flatMap((outcome) =>
      outcome.ok ? Effect.succeed(outcome.value) : Effect.fail(failureToError(outcome.error) as ProbeError)
    )
  )

const entry = fileURLToPath(new URL("./ConverterProcess.ts", import.meta.url))

const childCommand = (nice: number) => nicedNodeCommand(entry, nice, 256)

const RECYCLE_RSS = 512 * MiB
const START_TIMEOUT_MS = 30_000
const KILL_GRACE_MS = 5_000
const WATCH_INTERVAL_MS = 100

type JobError = ConversionTimeout | ConversionMemoryExceeded | CodecUnavailable | EncodeFailed

/** One pool item: a converter process, started when first needed and again after it is stopped. */
class Slot {
  private child: ChildProcess | null = null
  private seq = 0
  constructor(private readonly options: CodecOptions) {}

  private alive(): boolean {
    const c = this.child
    return c !== null && c.exitCode === null && c.signalCode === null && c.connected
  }

  stop(): void {
    this.child?.kill("SIGKILL")
    this.child = null
  }

  private start(): Effect.Effect<ChildProcess, CodecUnavailable> {
    if (this.alive()) return Effect.succeed(this.child!)
    this.stop()
    return Effect.async<ChildProcess, CodecUnavailable>((resume) => {
      const [command, args] = childCommand(this.options.nice)
      const child = spawn(command, args, {
        stdio: ["ignore", "inherit", "inherit", "ipc"],
        serialization: "advanced",
        // Fewer malloc arenas: freed image buffers go back to the OS sooner.
        env: { ...process.env, MALLOC_ARENA_MAX: "2", UV_THREADPOOL_SIZE: "2", VIPS_WARNING: "0" }
      })
      const done = (result: Effect.Effect<ChildProcess, CodecUnavailable>) => {
        clearTimeout(timer)
        child.off("message", onMessage).off("exit", onExit).off("error", onError)
        resume(result)
      }
      const unavailable = (why: string) => {
        child.kill("SIGKILL")
        done(Effect.fail(new CodecUnavailable({ message: `converter process ${why}` })))
      }
      const onMessage = (m: unknown) => {
        if (m !== "ready") return
        this.child = child
        done(Effect.succeed(child))
      }
      const onExit = (code: number | null, signal: string | null) => unavailable(`exited at start (${signal ?? code})`)
      const onError = (e: Error) => unavailable(`could not start: ${e.message}`)
      const timer = setTimeout(() => unavailable(`did not start within ${START_TIMEOUT_MS} ms`), START_TIMEOUT_MS)
      child.on("message", onMessage).on("exit", onExit).on("error", onError)
      return Effect.sync(() => {
        clearTimeout(timer)
        child.kill("SIGKILL")
      })
    })
  }

  run(request: Omit<ConvertRequest, "id">): Effect.Effect<ConvertReply, JobError> {
    return Effect.flatMap(this.start(), (child) => this.send(child, { ...request, id: ++this.seq })).pipe(
      Effect.tap(() => this.recycleIfBloated())
    )
  }

  private recycleIfBloated(): Effect.Effect<void> {
    const pid = this.child?.pid
    if (pid === undefined) return Effect.void
    return Effect.promise(() => rssOf(pid)).pipe(
      Effect.map((rss) => (rss !== null && rss > RECYCLE_RSS ? this.stop() : undefined))
    )
  }

  private send(child: ChildProcess, request: ConvertRequest): Effect.Effect<ConvertReply, JobError> {
    const { memoryLimitBytes } = this.options
    return Effect.async<ConvertReply, JobError>((resume) => {
      let settled = false
      let stoppedFor: JobError | null = null
      const settle = (result: Effect.Effect<ConvertReply, JobError>) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        clearInterval(watch)
        child.off("message", onMessage).off("exit", onExit)
        resume(result)
      }
      const stopFor = (error: JobError) => {
        stoppedFor = error
        this.stop()
      }
      const onMessage = (m: ConvertReply) => {
        if (typeof m === "object" && m !== null && m.id === request.id) settle(Effect.succeed(m))
      }
      const onExit = (code: number | null, signal: string | null) => {
        if (this.child === child) this.child = null
        settle(
          Effect.fail(stoppedFor ?? new CodecUnavailable({ message: `converter process died (${signal ?? code})` }))
        )
      }
      const limitSeconds = request.timeoutSeconds
      const timer = setTimeout(
        () =>
          stopFor(new ConversionTimeout({ message: `conversion did not finish within ${limitSeconds} s; stopped` })),
        limitSeconds * 1000 + KILL_GRACE_MS
      )
      let reading = false
      const watch = setInterval(() => {
        if (reading || child.pid === undefined) return
        reading = true
        rssOf(child.pid).then((rss) => {
          reading = false
          if (rss !== null && rss > memoryLimitBytes && !settled) {
            stopFor(
              new ConversionMemoryExceeded({
                message: `conversion used more than ${Math.round(memoryLimitBytes / MiB)} MiB; stopped`
              })
            )
          }
        })
      }, WATCH_INTERVAL_MS)
      child.on("message", onMessage).on("exit", onExit)
      child.send(request, (e) => {
        if (e) {
          stopFor(new CodecUnavailable({ message: `could not hand the image to the converter: ${e.message}` }))
        }
      })
      // Interrupted (the caller gave up or is shutting down): the work is abandoned with the process.
      return Effect.sync(() => {
        if (!settled) {
          settled = true
          clearTimeout(timer)
          clearInterval(watch)
          child.off("message", onMessage).off("exit", onExit)
          this.stop()
        }
      })
    })
  }
}

export const makeCodec = (options: CodecOptions) =>
  Effect.gen(function* () {
    const pool = yield* Pool.makeWithTTL({
      acquire: Effect.acquireRelease(
        Effect.sync(() => new Slot(options)),
        (slot) => Effect.sync(() => slot.stop())
      ),
      min: 0,
      max: options.concurrency,
      timeToLive: options.idleTimeToLive
    })
    yield* Effect.logInfo(
      `image codec: sharp in ${options.concurrency} converter process(es) at nice ${options.nice}, ` +
        `${options.timeoutSeconds} s, ${Math.round(options.memoryLimitBytes / MiB)} MiB each`
    )

    const probe = Effect.fn("Codec.probe")(function* (bytes: Uint8Array) {
      const p = yield* probeEffect(bytes)
      const published = publishedFormat(p)
      return {
        format: p.format,
        width: p.width,
        height: p.height,
        frames: p.frames,
        animated: p.animated,
        published,
        mime_type: mimeTypeOf(published)
      } satisfies ImageInfo
    })

    const convert = Effect.fn("Codec.convert")(function* (
      bytes: Uint8Array,
      convertOptions?: { readonly tier?: Tier }
    ) {
      const tier = convertOptions?.tier ?? "normal"
      const p = yield* probeEffect(bytes)
      const violation = limitViolation(p)
      if (violation) {
        return yield* violation.kind === "frames"
          ? new TooManyFrames({ message: violation.detail })
          : new TooManyPixels({ message: violation.detail })
      }
      const plan = planFor(p)
      const needed = estimateMemory(plan)
      if (needed > options.memoryLimitBytes) {
        return yield* new TooManyPixels({
          message:
            `${p.width} × ${p.height} px${p.frames > 1 ? ` × ${p.frames} frames` : ""} needs about ` +
            `${Math.round(needed / MiB)} MiB to convert, more than the ${Math.round(options.memoryLimitBytes / MiB)} MiB limit`
        })
      }
      const timeoutSeconds = tier === "normal" ? options.timeoutSeconds : options.timeoutSeconds * 2
      const reply = yield* Effect.scoped(
        Effect.flatMap(Pool.get(pool), (slot) => slot.run({ bytes, plan, tier, timeoutSeconds }))
      )
      if (!reply.ok) return yield* failureToError(reply.error)
      return reply.value satisfies ConvertedImage
    })

    return Codec.of({ probe, convert })
  })

const codecConfig = Effect.gen(function* () {
  const defaults = defaultCodecOptions()
  const positive = (name: string, fallback: number) =>
    Config.integer(name).pipe(
      Config.validate({ message: "must be a positive integer", validation: (n) => n > 0 }),
      Config.withDefault(fallback)
    )
  const values = yield* Config.all({
    concurrency: positive("IMAGE_CONVERT_CONCURRENCY", defaults.concurrency),
    nice: Config.integer("IMAGE_CONVERT_NICE").pipe(
      Config.validate({ message: "must be an integer from 0 to 19", validation: (n) => n >= 0 && n <= 19 }),
      Config.withDefault(defaults.nice)
    ),
    timeoutSeconds: positive("IMAGE_CONVERT_TIMEOUT_SECONDS", defaults.timeoutSeconds),
    memoryMb: positive("IMAGE_CONVERT_MEMORY_MB", Math.round(defaults.memoryLimitBytes / MiB))
  })
  return {
    ...defaults,
    concurrency: values.concurrency,
    nice: values.nice,
    timeoutSeconds: values.timeoutSeconds,
    memoryLimitBytes: values.memoryMb * MiB
  } satisfies CodecOptions
})

/**
 * The codec configured by IMAGE_CONVERT_CONCURRENCY (default 1 on up to 2 cores, else half
 * the cores), IMAGE_CONVERT_NICE (10), IMAGE_CONVERT_TIMEOUT_SECONDS (60) and
 * IMAGE_CONVERT_MEMORY_MB (3072).
 */
export const CodecLive = Layer.scoped(Codec, Effect.flatMap(codecConfig, makeCodec))

export const codecLayer = (options: Partial<CodecOptions> = {}) =>
  Layer.scoped(Codec, makeCodec({ ...defaultCodecOptions(), ...options }))
