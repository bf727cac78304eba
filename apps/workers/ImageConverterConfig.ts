import { randomBytes } from "node:crypto"
import os from "node:os"
import { Config, Effect } from "effect"
import { Topics } from "../../domain/Events.js"
import { SOURCE_RETENTION_MS } from "../../domain/Image.js"
import { defaultCodecOptions } from "../../infra/codec/ImageCodec.js"

export const CONVERTER_GROUP = "image-converter"

export interface ImageConverterOptions {
  /** The lease holder's name in image_jobs (unique per worker). */
  readonly workerId: string
  /** How long a claim holds a job; renewed every third of it while the conversion runs. */
  readonly leaseMs: number
  /** How often retries, jobs of crashed workers, expired sources and deleted blobs are looked for. */
  readonly sweepMs: number
  /** Attempts before a temporary failure becomes permanent. */
  readonly maxAttempts: number
  /** Back-off after the n-th failed attempt: base × 4^(n-1), at most `retryMaxMs`. */
  readonly retryBaseMs: number
  readonly retryMaxMs: number
  /** Private sources are kept this long, then purged and the image fails. */
  readonly retentionMs: number
  /** Jobs worked on at once (each holds its source in memory). */
  readonly inFlight: number
  readonly topic: string
  readonly group: string
}

export const defaultImageConverterOptions = (): ImageConverterOptions => ({
  workerId: `converter-${os.hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`,
  // Short, renewed every third of it while a conversion runs: the job of a crashed worker
  // (kill -9) is taken over by the next sweep after it expires, within about 12 s. A clean
  // stop gives its leases back at once.
  leaseMs: 10_000,
  sweepMs: 2_000,
  maxAttempts: 6,
  retryBaseMs: 1_000,
  retryMaxMs: 300_000,
  retentionMs: SOURCE_RETENTION_MS,
  inFlight: defaultCodecOptions().concurrency + 1,
  topic: Topics.images,
  group: CONVERTER_GROUP
})

export const retryDelay = (options: ImageConverterOptions, failedAttempt: number) =>
  Math.min(options.retryMaxMs, options.retryBaseMs * 4 ** Math.max(0, failedAttempt - 1))

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be a positive integer", validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

/** The converter's options from the environment (see ImageConverterLive). */
export const converterConfig = Effect.gen(function* () {
  const defaults = defaultImageConverterOptions()
  const values = yield* Config.all({
    sweepMs: positive("IMAGE_JOB_SWEEP_MS", defaults.sweepMs),
    leaseMs: Config.integer("IMAGE_JOB_LEASE_MS").pipe(
      Config.validate({ message: "must be an integer of at least 1000 (ms)", validation: (n) => n >= 1000 }),
      Config.withDefault(defaults.leaseMs)
    ),
    maxAttempts: positive("IMAGE_CONVERT_MAX_ATTEMPTS", defaults.maxAttempts),
    // The codec's own setting: one job per conversion slot, plus one whose source is ready.
    concurrency: positive("IMAGE_CONVERT_CONCURRENCY", defaultCodecOptions().concurrency)
  })
  return {
    ...defaults,
    sweepMs: values.sweepMs,
    leaseMs: values.leaseMs,
    maxAttempts: values.maxAttempts,
    inFlight: values.concurrency + 1
  } satisfies ImageConverterOptions
})
