import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import os from "node:os"
import path from "node:path"
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { ConfigProvider, Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { makeFsBlobStore } from "../../infra/blobstore/FsBlobStore.js"
import { makeS3BlobStore, type S3Options } from "../../infra/blobstore/S3BlobStore.js"

const quiet = Logger.minimumLogLevel(LogLevel.Error)

interface S3rverInstance {
  run(): Promise<{ address: string; port: number }>
  close(): Promise<void>
}
type S3rverClass = new (options: Record<string, unknown>) => S3rverInstance
// s3rver ships no types: a fake S3 server in JavaScript, from the npm registry.
const S3rver = createRequire(import.meta.url)("s3rver") as S3rverClass

const fill = (byte: number, length: number) => new Uint8Array(length).fill(byte)

/** The port's rules, the same for every adapter. */
const contract = (
  store: () => ManagedRuntime.ManagedRuntime<BlobStore, unknown>,
  atomicity: { readonly skip: false } | { readonly skip: true; readonly why: string } = { skip: false }
) => {
  const run = <A, E>(f: (s: BlobStore["Type"]) => Effect.Effect<A, E>) =>
    store().runPromise(Effect.flatMap(BlobStore, f))
  const runExit = <A, E>(f: (s: BlobStore["Type"]) => Effect.Effect<A, E>) =>
    store().runPromise(Effect.exit(Effect.flatMap(BlobStore, f)))

  it("a put is read back byte for byte; a second put of the key replaces the object", async () => {
    const key = `images/k${Date.now()}.webp`
    await run((s) => s.put(key, fill(1, 1000), "image/webp"))
    expect(Option.map(await run((s) => s.get(key)), (b) => Buffer.from(b).equals(Buffer.from(fill(1, 1000))))).toEqual(
      Option.some(true)
    )
    await run((s) => s.put(key, fill(2, 10), "image/webp"))
    expect(Option.map(await run((s) => s.get(key)), (b) => Array.from(b))).toEqual(Option.some(Array(10).fill(2)))
  })

  it.skipIf(atomicity.skip)(
    `a reader never sees half an object while puts of the same key run (atomic put)${atomicity.skip ? ` ${atomicity.why}` : ""}`,
    async () => {
      const key = `images/atomic${Date.now()}.webp`
      const size = 256 * 1024
      await run((s) => s.put(key, fill(0x61, size), "image/webp"))
      const seen = await run((s) =>
        Effect.all(
          [
            Effect.forEach(
              Array.from({ length: 10 }, (_, i) => i),
              (i) => s.put(key, fill(i % 2 === 0 ? 0x62 : 0x61, size), "image/webp"),
              { concurrency: 3, discard: true }
            ),
            Effect.forEach(
              Array.from({ length: 30 }, () => 0),
              () => s.get(key),
              { concurrency: 3 }
            )
          ],
          { concurrency: 2 }
        ).pipe(Effect.map(([, reads]) => reads))
      )
      for (const read of seen) {
        expect(Option.isSome(read)).toBe(true)
        const bytes = Option.getOrThrow(read)
        expect(bytes.length).toBe(size)
        expect(bytes.every((b) => b === bytes[0])).toBe(true)
      }
    }
  )

  it("get of a missing key is None", async () => {
    expect(await run((s) => s.get(`images/missing${Date.now()}.webp`))).toEqual(Option.none())
  })

  it("remove deletes the object and removing it again (or a key never written) succeeds", async () => {
    const key = `images/gone${Date.now()}.gif`
    await run((s) => s.put(key, fill(3, 5), "image/gif"))
    await run((s) => s.remove(key))
    expect(await run((s) => s.get(key))).toEqual(Option.none())
    await run((s) => s.remove(key))
    await run((s) => s.remove(`never/written${Date.now()}`))
  })

  it("invalid keys (traversal, absolute, empty segments, odd characters) are a defect, never a request", async () => {
    for (const key of ["../escape", "/absolute", "a//b", "a/./b", "a/../b", "with space", "", "ümlaut", "a/"]) {
      const exits: Array<Exit.Exit<unknown, unknown>> = [
        await runExit((s) => s.put(key, fill(0, 1), "image/webp")),
        await runExit((s) => s.get(key)),
        await runExit((s) => s.remove(key))
      ]
      for (const exit of exits) {
        expect([key, Exit.isFailure(exit) && exit.cause._tag === "Die"]).toEqual([key, true])
      }
    }
  })
}

describe("filesystem blob store", () => {
  let root: string
  let rt: ManagedRuntime.ManagedRuntime<BlobStore, never>
  beforeAll(() => {
    root = mkdtempSync(path.join(os.tmpdir(), "blobs-"))
    rt = ManagedRuntime.make(Layer.succeed(BlobStore, makeFsBlobStore(root)))
  })
  afterAll(async () => {
    await rt.dispose()
    rmSync(root, { recursive: true, force: true })
  })

  contract(() => rt)

  it("leaves no temporary files behind after puts", () => {
    const files = readdirSync(path.join(root, "images"))
    expect(files.filter((f) => f.endsWith(".tmp"))).toEqual([])
  })
})

/** A real S3 service: TEST_S3_ENDPOINT (with TEST_S3_BUCKET etc.) when set, else s3rver started here. */
const externalS3 = (): S3Options | undefined => {
  const endpoint = process.env.TEST_S3_ENDPOINT?.trim()
  if (!endpoint) return undefined
  const id = process.env.TEST_S3_ACCESS_KEY_ID
  const secret = process.env.TEST_S3_SECRET_ACCESS_KEY
  return {
    bucket: process.env.TEST_S3_BUCKET ?? "test",
    region: process.env.TEST_S3_REGION ?? "us-east-1",
    endpoint: Option.some(endpoint),
    credentials:
      id && secret
        ? Option.some({ accessKeyId: Redacted.make(id), secretAccessKey: Redacted.make(secret) })
        : Option.none()
  }
}

const external = externalS3()

describe(`S3 blob store (${external ? "TEST_S3_ENDPOINT" : "s3rver started by the test; set TEST_S3_ENDPOINT for a real service"})`, () => {
  let options: S3Options
  let server: S3rverInstance | undefined
  let dir: string | undefined
  let rt: ManagedRuntime.ManagedRuntime<BlobStore, unknown>
  let raw: S3Client

  beforeAll(async () => {
    if (external) {
      options = external
    } else {
      dir = mkdtempSync(path.join(os.tmpdir(), "s3rver-"))
      server = new S3rver({
        address: "127.0.0.1",
        port: 0,
        directory: dir,
        silent: true,
        configureBuckets: [{ name: "images-test" }]
      })
      const { port } = await server.run()
      options = {
        bucket: "images-test",
        region: "us-east-1",
        endpoint: Option.some(`http://127.0.0.1:${port}`),
        credentials: Option.some({ accessKeyId: Redacted.make("S3RVER"), secretAccessKey: Redacted.make("S3RVER") })
      }
    }
    rt = ManagedRuntime.make(Layer.scoped(BlobStore, makeS3BlobStore(options)).pipe(Layer.provide(quiet)))
    await rt.runtime()
    raw = new S3Client({
      region: options.region,
      ...(Option.isSome(options.endpoint) ? { endpoint: options.endpoint.value, forcePathStyle: true } : {}),
      ...(Option.isSome(options.credentials)
        ? {
            credentials: {
              accessKeyId: Redacted.value(options.credentials.value.accessKeyId),
              secretAccessKey: Redacted.value(options.credentials.value.secretAccessKey)
            }
          }
        : {})
    })
  })
  afterAll(async () => {
    raw?.destroy()
    await rt?.dispose()
    await server?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  // s3rver writes objects in place, so only a real service can show S3's atomic PUT.
  contract(() => rt, external ? { skip: false } : { skip: true, why: "(needs TEST_S3_ENDPOINT: s3rver is not atomic)" })

  it("stores the object with the given Content-Type", async () => {
    const key = `images/typed${Date.now()}.gif`
    await rt.runPromise(Effect.flatMap(BlobStore, (s) => s.put(key, fill(7, 64), "image/gif")))
    const out = await raw.send(new GetObjectCommand({ Bucket: options.bucket, Key: key }))
    expect(out.ContentType).toBe("image/gif")
    expect((await out.Body!.transformToByteArray()).length).toBe(64)
  })

  it("a missing bucket is a BlobStoreError, not a missing object", async () => {
    const wrong = ManagedRuntime.make(
      Layer.scoped(BlobStore, makeS3BlobStore({ ...options, bucket: "no-such-bucket-here" })).pipe(Layer.provide(quiet))
    )
    try {
      const exit = await wrong.runPromise(Effect.exit(Effect.flatMap(BlobStore, (s) => s.get("images/x.webp"))))
      expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error._tag).toBe("BlobStoreError")
    } finally {
      await wrong.dispose()
    }
  })

  describe("BlobStoreLive", () => {
    const live = (env: Record<string, string>) =>
      ManagedRuntime.make(
        BlobStoreLive.pipe(
          Layer.provide(AppConfig.layer),
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
          Layer.provide(quiet)
        )
      )
    const startError = async (env: Record<string, string>) => {
      const rt = live(env)
      try {
        const exit = await Effect.runPromiseExit(Effect.promise(() => rt.runtime()).pipe(Effect.asVoid))
        return Exit.isFailure(exit) ? String(exit.cause) : "started"
      } catch (e) {
        return String(e)
      } finally {
        await rt.dispose().catch(() => undefined)
      }
    }

    it("uses S3 (path-style at S3_ENDPOINT) when S3_BUCKET is set", async () => {
      const env: Record<string, string> = {
        S3_BUCKET: options.bucket,
        S3_REGION: options.region,
        S3_ENDPOINT: Option.getOrThrow(options.endpoint)
      }
      if (Option.isSome(options.credentials)) {
        env.S3_ACCESS_KEY_ID = Redacted.value(options.credentials.value.accessKeyId)
        env.S3_SECRET_ACCESS_KEY = Redacted.value(options.credentials.value.secretAccessKey)
      }
      const rt = live(env)
      try {
        const key = `images/live${Date.now()}.webp`
        await rt.runPromise(Effect.flatMap(BlobStore, (s) => s.put(key, fill(9, 3), "image/webp")))
        const out = await raw.send(new GetObjectCommand({ Bucket: options.bucket, Key: key }))
        expect(Array.from(await out.Body!.transformToByteArray())).toEqual([9, 9, 9])
      } finally {
        await rt.dispose()
      }
    })

    it("uses files under DATA_DIR/objects when S3_BUCKET is unset or empty", async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), "data-"))
      const rt = live({ DATA_DIR: dataDir, S3_BUCKET: "" })
      try {
        await rt.runPromise(Effect.flatMap(BlobStore, (s) => s.put("images/f.webp", fill(1, 2), "image/webp")))
        expect(readdirSync(path.join(dataDir, "objects", "images"))).toEqual(["f.webp"])
      } finally {
        await rt.dispose()
        rmSync(dataDir, { recursive: true, force: true })
      }
    })

    it("a bad S3 setting stops start-up with an error naming the variable", async () => {
      expect(await startError({ S3_BUCKET: "images", S3_ENDPOINT: "ftp://example" })).toContain("S3_ENDPOINT")
      expect(await startError({ S3_BUCKET: "Not_A_Bucket" })).toContain("S3_BUCKET")
      expect(await startError({ S3_BUCKET: "images", S3_REGION: "US East" })).toContain("S3_REGION")
      expect(await startError({ S3_BUCKET: "images", S3_ACCESS_KEY_ID: "only-the-id" })).toContain(
        "S3_SECRET_ACCESS_KEY"
      )
    })
  })
})
