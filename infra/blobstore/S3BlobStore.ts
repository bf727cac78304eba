import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  PutObjectCommand,
  S3Client,
  type S3ServiceException
} from "@aws-sdk/client-s3"
import { Effect, Option, Redacted } from "effect"
import { BlobStore, BlobStoreError, type BlobStoreShape, checkKey } from "../../domain/ports/BlobStore.js"

export interface S3Options {
  readonly bucket: string
  readonly region: string
  /** An S3-compatible service (MinIO…); None: AWS S3. Path-style addressing when given. */
  readonly endpoint: Option.Option<string>
  /** None: the SDK's default credential chain (AWS_* variables, instance role). */
  readonly credentials: Option.Option<{
    readonly accessKeyId: Redacted.Redacted
    readonly secretAccessKey: Redacted.Redacted
  }>
}

const statusOf = (e: unknown): number | undefined =>
  (e as Partial<S3ServiceException> | null)?.$metadata?.httpStatusCode

const nameOf = (e: unknown): string | undefined => (e as { name?: unknown } | null)?.name as string | undefined

/** A missing object (not a missing bucket: that is a misconfiguration and stays an error). */
const isMissingKey = (e: unknown) =>
  nameOf(e) === "NoSuchKey" || nameOf(e) === "NotFound" || (statusOf(e) === 404 && nameOf(e) !== "NoSuchBucket")

const describe = (e: unknown) => {
  const status = statusOf(e)
  const message = e instanceof Error ? e.message : String(e)
  return `${nameOf(e) ?? "error"}${status === undefined ? "" : ` (HTTP ${status})`}: ${message}`
}

/**
 * Objects in an S3 bucket (AWS S3, or an S3-compatible service such as MinIO). The client is
 * acquired with the scope and destroyed when it closes. A PUT is atomic in S3 already: a
 * reader sees the whole object or the previous state. Requests are aborted when interrupted.
 */
export const makeS3BlobStore = (options: S3Options) =>
  Effect.gen(function* () {
    const client = yield* Effect.acquireRelease(
      Effect.sync(
        () =>
          new S3Client({
            region: options.region,
            ...(Option.isSome(options.endpoint) ? { endpoint: options.endpoint.value, forcePathStyle: true } : {}),
            ...(Option.isSome(options.credentials)
              ? {
                  credentials: {
                    accessKeyId: Redacted.value(options.credentials.value.accessKeyId),
                    secretAccessKey: Redacted.value(options.credentials.value.secretAccessKey)
                  }
                }
              : {}),
            // Checksums only where the API requires them: older S3-compatible services reject the rest.
            requestChecksumCalculation: "WHEN_REQUIRED",
            responseChecksumValidation: "WHEN_REQUIRED",
            maxAttempts: 3,
            requestHandler: { connectionTimeout: 5_000, requestTimeout: 60_000 }
          })
      ),
      (c) => Effect.sync(() => c.destroy())
    )
    const bucket = options.bucket
    const where = `s3://${bucket}${Option.isSome(options.endpoint) ? ` at ${options.endpoint.value}` : ""}`
    const fail = (what: string) => (e: unknown) => new BlobStoreError({ message: `${what}: ${describe(e)}`, cause: e })

    const put: BlobStoreShape["put"] = (key, bytes, contentType) =>
      Effect.zipRight(
        checkKey(key),
        Effect.tryPromise({
          try: (signal) =>
            client.send(
              new PutObjectCommand({
                Bucket: bucket,
                Key: key,
                Body: bytes,
                ContentType: contentType,
                ContentLength: bytes.length
              }),
              { abortSignal: signal }
            ),
          catch: fail(`writing blob ${key} to ${where}`)
        })
      ).pipe(Effect.asVoid)

    const get: BlobStoreShape["get"] = (key) =>
      Effect.zipRight(
        checkKey(key),
        Effect.tryPromise({
          try: async (signal) => {
            try {
              const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }), {
                abortSignal: signal
              })
              if (out.Body === undefined) return Option.some<Uint8Array>(new Uint8Array(0))
              return Option.some<Uint8Array>(await out.Body.transformToByteArray())
            } catch (e) {
              if (isMissingKey(e)) return Option.none<Uint8Array>()
              throw e
            }
          },
          catch: fail(`reading blob ${key} from ${where}`)
        })
      )

    const remove: BlobStoreShape["remove"] = (key) =>
      Effect.zipRight(
        checkKey(key),
        Effect.tryPromise({
          try: async (signal) => {
            try {
              await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }), { abortSignal: signal })
            } catch (e) {
              // S3 answers 204 for a missing key; some compatible services answer 404.
              if (!isMissingKey(e)) throw e
            }
          },
          catch: fail(`removing blob ${key} from ${where}`)
        })
      )

    // A reachable bucket is checked once, as a warning only: a key may lack s3:ListBucket.
    yield* Effect.tryPromise({
      try: (signal) => client.send(new HeadBucketCommand({ Bucket: bucket }), { abortSignal: signal }),
      catch: (e) => describe(e)
    }).pipe(
      Effect.timeout("10 seconds"),
      Effect.matchEffect({
        onSuccess: () => Effect.logInfo(`blob store: S3 bucket ${where}`),
        onFailure: (why) => Effect.logWarning(`blob store: S3 bucket ${where} did not answer a check: ${String(why)}`)
      })
    )

    return BlobStore.of({ put, get, remove })
  })
