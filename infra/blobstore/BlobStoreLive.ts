import * as path from "node:path"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { AppConfig } from "../AppConfig.js"
import { makeFsBlobStore } from "./FsBlobStore.js"

// Validation sits before Config.option so that a failure names the variable; empty counts
// as unset, as for DATABASE_URL.
const optionalString = (name: string, message: string, valid: (s: string) => boolean) =>
  Config.string(name).pipe(
    Config.validate({ message, validation: (s) => s.trim() === "" || valid(s.trim()) }),
    Config.option,
    Config.map(Option.map((s) => s.trim())),
    Config.map(Option.filter((s) => s !== ""))
  )

const optionalSecret = (name: string) =>
  Config.option(Config.redacted(name)).pipe(Config.map(Option.filter((s) => Redacted.value(s).trim() !== "")))

/** S3 bucket names: 3 to 63 lower-case letters, digits, dots and hyphens. */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/

export const s3Config = Config.all({
  bucket: optionalString(
    "S3_BUCKET",
    "must be an S3 bucket name (3 to 63 lower-case letters, digits, dots and hyphens)",
    (s) => BUCKET.test(s)
  ),
  endpoint: optionalString(
    "S3_ENDPOINT",
    "must be an absolute http(s) URL of an S3-compatible service",
    (s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol)
  ).pipe(Config.map(Option.map((s) => s.replace(/\/+$/, "")))),
  region: Config.string("S3_REGION").pipe(
    Config.validate({ message: "must be a region name such as us-east-1", validation: (s) => /^[a-z0-9-]+$/.test(s) }),
    Config.withDefault("us-east-1")
  ),
  accessKeyId: optionalSecret("S3_ACCESS_KEY_ID"),
  secretAccessKey: optionalSecret("S3_SECRET_ACCESS_KEY")
}).pipe(
  Config.validate({
    message: "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY must be set together (or neither, for the default AWS chain)",
    validation: (c) => Option.isSome(c.accessKeyId) === Option.isSome(c.secretAccessKey)
  })
)

/**
 * The blob store: S3 (or an S3-compatible service at S3_ENDPOINT, path-style) when S3_BUCKET
 * is set, otherwise files under DATA_DIR/objects. S3_REGION defaults to us-east-1;
 * S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together, or the SDK's default chain is used.
 */
export const BlobStoreLive = Layer.scoped(
  BlobStore,
  Effect.gen(function* () {
    const s3 = yield* s3Config
    if (Option.isSome(s3.bucket)) {
      // The AWS SDK is loaded only when S3 is configured.
      const { makeS3BlobStore } = yield* Effect.promise(() => import("./S3BlobStore.js"))
      return yield* makeS3BlobStore({
        bucket: s3.bucket.value,
        region: s3.region,
        endpoint: s3.endpoint,
        credentials: Option.all({ accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey })
      })
    }
    const config = yield* AppConfig
    const root = path.resolve(config.dataDir, "objects")
    yield* Effect.logInfo(`blob store: files in ${root} (no S3_BUCKET)`)
    return makeFsBlobStore(root)
  })
)
