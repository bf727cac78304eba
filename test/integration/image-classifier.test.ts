import { randomBytes } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { ConfigProvider, Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Option } from "effect"
import pg from "pg"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runImageClassifier } from "../../apps/workers/ImageClassifier.js"
import { AccountId } from "../../domain/Account.js"
import { NSFW_CLASSES } from "../../domain/Classification.js"
import { type CreationRating, ImageId } from "../../domain/Image.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { Classifier, type ClassifierError } from "../../domain/ports/Classifier.js"
import { ImageJobRepo } from "../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { makeFsBlobStore } from "../../infra/blobstore/FsBlobStore.js"
import { ClassifierLive } from "../../infra/classifier/ClassifierLive.js"
import { makeHttpClassifier } from "../../infra/classifier/HttpClassifier.js"
import { NoneClassifierLive } from "../../infra/classifier/NoneClassifier.js"
import {
  defaultNsfwjsOptions,
  makeNsfwjsClassifier,
  type NsfwjsOptions
} from "../../infra/classifier/NsfwjsClassifier.js"
import { ImageReposLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { OutboxRelayLive } from "../../infra/postgres/OutboxRelay.js"
import { TransactionsLive } from "../../infra/postgres/Transactions.js"
import { animatedGif, pngWithAlpha } from "../fixtures/images/make.js"
import { createTestDatabase, dropTestDatabase } from "../support/database.js"
import { embeddedEventLogLayer } from "../support/eventlog.js"
import { waitFor } from "../support/waitFor.js"

const quiet = Logger.minimumLogLevel(LogLevel.Error)
const ACCOUNT = "acct_classifier"

// --- fixtures -------------------------------------------------------------------------------

const plainWebp = () =>
  sharp({ create: { width: 320, height: 240, channels: 3, background: { r: 190, g: 190, b: 190 } } })
    .webp()
    .toBuffer()

/** A photo-like landscape: a sky gradient, a hill line and noisy green ground. */
const landscapeWebp = () => {
  const width = 640
  const height = 427
  const raw = Buffer.alloc(width * height * 3)
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 3
      const hill = height * 0.55 + Math.sin(x / 60) * 25
      const n = Math.floor(Math.random() * 40) - 20
      if (y < hill) {
        raw[o] = 90 + (y * 80) / height
        raw[o + 1] = 150 + (y * 60) / height
        raw[o + 2] = 235
      } else {
        raw[o] = Math.max(0, 40 + n)
        raw[o + 1] = Math.max(0, 120 + n + (y - hill) / 4)
        raw[o + 2] = Math.max(0, 35 + n)
      }
    }
  }
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .webp({ quality: 85 })
    .toBuffer()
}

const alphaWebp = async () =>
  sharp(await pngWithAlpha())
    .webp()
    .toBuffer()

/** The nice value of a running process (field 19 of /proc/<pid>/stat). */
const niceOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[16])

/** nsfwjs child processes of this test process. */
const classifierChildren = () =>
  readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, "utf8")
        const ppid = Number(stat.split(") ")[1]!.split(" ")[1])
        return ppid === process.pid && readFileSync(`/proc/${d}/cmdline`, "utf8").includes("NsfwjsProcess.ts")
      } catch {
        return false
      }
    })
    .map(Number)

const nsfwjsLayer = (options: Partial<NsfwjsOptions> = {}) =>
  Layer.scoped(
    Classifier,
    Effect.map(makeNsfwjsClassifier({ ...defaultNsfwjsOptions, ...options }), (n) => n.classifier)
  )

// --- the nsfwjs adapter ---------------------------------------------------------------------

describe("nsfwjs classifier (model from the npm package, TensorFlow.js WASM, niced child process)", () => {
  const runtime = ManagedRuntime.make(nsfwjsLayer().pipe(Layer.provide(quiet)))
  const classify = (bytes: Uint8Array) => runtime.runPromise(Effect.flatMap(Classifier, (c) => c.classify(bytes)))
  afterAll(() => runtime.dispose())

  it("loads offline from local files and rates a plain and a photo-like image with scores summing to 1", async () => {
    const plain = await plainWebp()
    const photo = await landscapeWebp()
    const t0 = performance.now()
    const first = await classify(plain)
    const loadAndFirst = performance.now() - t0
    const times: Array<number> = []
    for (const bytes of [photo, plain, photo]) {
      const t = performance.now()
      const result = await classify(bytes)
      times.push(performance.now() - t)
      expect(["general", "sensitive", "nsfw"]).toContain(result.rating)
    }
    const second = await classify(photo)
    console.log(
      `nsfwjs ${defaultNsfwjsOptions.model}: model load + first image ${loadAndFirst.toFixed(0)} ms; ` +
        `per image ${times.map((t) => t.toFixed(0)).join(", ")} ms (decode + inference + IPC, nice ${defaultNsfwjsOptions.nice})`
    )
    console.log(`plain grey: ${first.rating} ${JSON.stringify(first.scores)}`)
    console.log(`landscape: ${second.rating} ${JSON.stringify(second.scores)}`)
    for (const r of [first, second]) {
      expect(Object.keys(r.scores).sort()).toEqual([...NSFW_CLASSES].sort())
      const sum = Object.values(r.scores).reduce((a, b) => a + b, 0)
      expect(Math.abs(sum - 1)).toBeLessThan(0.01)
    }
    // A flat grey card and a landscape are not explicit.
    expect(first.rating).toBe("general")
    expect(second.rating).not.toBe("nsfw")
  }, 180_000)

  it("runs inference in one child process at nice 10, kept warm between images", async () => {
    await classify(await plainWebp())
    const before = classifierChildren()
    expect(before).toHaveLength(1)
    expect(niceOf(before[0]!)).toBe(10)
    await classify(await plainWebp())
    expect(classifierChildren()).toEqual(before)
    const rss = /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${before[0]}/status`, "utf8"))?.[1]
    console.log(`nsfwjs child process resident memory: ${Math.round(Number(rss) / 1024)} MiB`)
  }, 180_000)

  it("classifies the first frame of an animated GIF and an image with transparency", async () => {
    const gif = await classify(await animatedGif(5))
    const alpha = await classify(await alphaWebp())
    for (const r of [gif, alpha]) expect(["general", "sensitive", "nsfw"]).toContain(r.rating)
  }, 180_000)

  it("bytes that are not an image give a ClassifierError and the next image still works", async () => {
    const error = await runtime.runPromise(
      Effect.flip(Effect.flatMap(Classifier, (c) => c.classify(new TextEncoder().encode("not an image"))))
    )
    expect(error._tag).toBe("ClassifierError")
    expect((await classify(await plainWebp())).rating).toBe("general")
  }, 180_000)

  it("an image past the time guard is stopped: ClassifierError, and its child process is killed", async () => {
    const before = new Set(classifierChildren())
    const guarded = ManagedRuntime.make(nsfwjsLayer({ timeoutSeconds: 0.001 }).pipe(Layer.provide(quiet)))
    try {
      const bytes = await landscapeWebp()
      const timedOut: ClassifierError = await guarded.runPromise(
        Effect.flip(Effect.flatMap(Classifier, (c) => c.classify(bytes)))
      )
      expect(timedOut.message).toMatch(/no answer within/)
      await waitFor(() => classifierChildren().every((pid) => before.has(pid)), { message: "the stopped child to go" })
    } finally {
      await guarded.dispose()
    }
  }, 180_000)

  it("past the bounded queue, classify fails at once with busy instead of piling up", async () => {
    const bounded = ManagedRuntime.make(nsfwjsLayer({ maxQueue: 1 }).pipe(Layer.provide(quiet)))
    try {
      const bytes = await plainWebp()
      const results = await Promise.allSettled(
        [1, 2, 3].map(() => bounded.runPromise(Effect.flatMap(Classifier, (c) => c.classify(bytes))))
      )
      const failed = results.filter((r) => r.status === "rejected")
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1)
      expect(failed).toHaveLength(2)
      expect(String((failed[0] as PromiseRejectedResult).reason)).toMatch(/busy/)
    } finally {
      await bounded.dispose()
    }
  }, 180_000)
})

// --- the classification worker ---------------------------------------------------------------

interface Stack {
  readonly databaseUrl: string
  readonly blobDir: string
  readonly db: pg.Client
  readonly runtime: ManagedRuntime.ManagedRuntime<ImageRepo | ImageJobRepo | BlobStore | PgClient.PgClient, unknown>
}

/**
 * Real PostgreSQL with the embedded log, the outbox relay, FsBlobStore in a temp dir and the
 * worker under test with the given classifier.
 */
const startStack = async (
  classifier: Layer.Layer<Classifier>,
  options: Parameters<typeof runImageClassifier>[0] = {}
): Promise<Stack> => {
  const databaseUrl = await createTestDatabase()
  const blobDir = mkdtempSync(path.join(tmpdir(), "classifier-blobs-"))
  const infra = Layer.mergeAll(
    ImageReposLive.pipe(Layer.provideMerge(OutboxLive)),
    TransactionsLive,
    Layer.succeed(BlobStore, makeFsBlobStore(blobDir)),
    classifier
  ).pipe(Layer.provideMerge(embeddedEventLogLayer(databaseUrl)))
  const workers = Layer.mergeAll(OutboxRelayLive, Layer.scopedDiscard(runImageClassifier(options)))
  const runtime = ManagedRuntime.make(workers.pipe(Layer.provideMerge(infra), Layer.provide(quiet)))
  await runtime.runtime()
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  await db.query("INSERT INTO accounts (id, name) VALUES ($1, 'classifier test')", [ACCOUNT])
  return { databaseUrl, blobDir, db, runtime }
}

const stopStack = async (stack: Stack | undefined) => {
  if (stack === undefined) return
  await stack.db.end()
  await stack.runtime.dispose()
  await dropTestDatabase(stack.databaseUrl)
  rmSync(stack.blobDir, { recursive: true, force: true })
}

const newImageId = () => randomBytes(8).toString("base64url").replace(/[-_]/g, "x").slice(0, 7)

/**
 * A published image as the conversion worker leaves it: the blob put, then in one transaction
 * the row inserted and marked ready (image.converted in the outbox); `then` runs in the same
 * transaction (an owner's declaration, a deletion) before the worker can see the event.
 */
const publish = (
  stack: Stack,
  bytes: Uint8Array,
  requestedRating: CreationRating,
  then: "nothing" | "delete" | "declare general" = "nothing"
) =>
  stack.runtime.runPromise(
    Effect.gen(function* () {
      const images = yield* ImageRepo
      const jobs = yield* ImageJobRepo
      const blobs = yield* BlobStore
      const sql = yield* PgClient.PgClient
      const id = newImageId()
      const gif = bytes[0] === 0x47
      const ext = gif ? "gif" : "webp"
      const mimeType = `image/${ext}`
      const key = `images/${id}.${ext}`
      yield* blobs.put(key, bytes, mimeType)
      const meta = yield* Effect.promise(() => sharp(bytes).metadata())
      yield* Effect.gen(function* () {
        yield* images.insert({
          id: ImageId.make(id),
          accountId: AccountId.make(ACCOUNT),
          unmetered: false,
          requestedRating,
          sourceFormat: ext,
          sourceBytes: bytes.length,
          sourceUrl: null,
          mimeType,
          ext
        })
        const ready = Option.getOrThrow(
          yield* jobs.markReady(ImageId.make(id), {
            mimeType,
            ext,
            blobKey: key,
            width: meta.width!,
            height: meta.pageHeight ?? meta.height!,
            frames: meta.pages ?? 1,
            animated: (meta.pages ?? 1) > 1,
            bytes: bytes.length
          })
        )
        if (then === "delete") yield* images.softDelete(ready)
        if (then === "declare general") yield* images.rate(ready, "general", "owner", "key_owner")
      }).pipe(sql.withTransaction)
      return id
    })
  )

const imageRow = async (stack: Stack, id: string) =>
  (await stack.db.query("SELECT status, rating, rating_source, deleted_at FROM images WHERE id = $1", [id])).rows[0]
const ratingChanges = async (stack: Stack, id: string) =>
  (await stack.db.query("SELECT * FROM rating_changes WHERE image_id = $1 ORDER BY seq", [id])).rows
const ratedEvents = async (stack: Stack, id: string) =>
  (
    await stack.db.query(
      "SELECT event FROM outbox WHERE topic = 'images.v1' AND key = $1 AND event->>'type' = 'image.rated' ORDER BY seq",
      [id]
    )
  ).rows.map((r) => r.event)

/** The relay published everything and the worker's group consumed all of images.v1. */
const drained = async (stack: Stack, group = "image-classifier") => {
  const unpublished = await stack.db.query("SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL")
  if (unpublished.rows[0].n > 0) return false
  const lag = await stack.db.query(
    `SELECT coalesce(sum(h.next_offset - o.next_offset), 0)::int AS lag, count(o.*)::int AS members
     FROM event_log_heads h LEFT JOIN event_log_offsets o
       ON o.topic = h.topic AND o.partition = h.partition AND o.group_id = $1
     WHERE h.topic = 'images.v1'`,
    [group]
  )
  return lag.rows[0].members > 0 && lag.rows[0].lag === 0
}

describe("classification worker with nsfwjs (embedded PostgreSQL, embedded log, FsBlobStore)", () => {
  let stack: Stack | undefined
  beforeAll(async () => {
    stack = await startStack(nsfwjsLayer())
  })
  afterAll(() => stopStack(stack))

  it("an auto image that is ready becomes rated by the classifier, audited, with image.rated on images.v1", async () => {
    const s = stack!
    const id = await publish(s, await landscapeWebp(), "auto")
    await waitFor(async () => (await imageRow(s, id)).rating !== "unrated", {
      message: "the classifier to rate the image",
      timeoutMs: 60_000
    })
    const row = await imageRow(s, id)
    expect(row.status).toBe("ready")
    expect(["general", "sensitive", "nsfw"]).toContain(row.rating)
    expect(row.rating_source).toBe("classifier")
    const changes = await ratingChanges(s, id)
    expect(changes).toHaveLength(1)
    expect(changes[0]).toMatchObject({
      from_rating: "unrated",
      to_rating: row.rating,
      source: "classifier",
      actor: "classifier:nsfwjs"
    })
    const events = await ratedEvents(s, id)
    expect(events).toHaveLength(1)
    expect(events[0].data).toMatchObject({
      id,
      status: "ready",
      content_rating: row.rating,
      rating_source: "classifier",
      change: { from: "unrated", to: row.rating, source: "classifier", actor: "classifier:nsfwjs" }
    })
  }, 180_000)

  it("owner declarations are never touched: declared at creation, or declared before the classifier ran", async () => {
    const s = stack!
    const declared = await publish(s, await plainWebp(), "nsfw")
    const declaredLater = await publish(s, await plainWebp(), "auto", "declare general")
    const marker = await publish(s, await plainWebp(), "auto")
    await waitFor(async () => (await imageRow(s, marker)).rating !== "unrated", {
      message: "the worker to pass the images",
      timeoutMs: 60_000
    })
    await waitFor(() => drained(s), { message: "the log to drain", timeoutMs: 60_000 })
    expect(await imageRow(s, declared)).toMatchObject({ rating: "nsfw", rating_source: "owner" })
    expect(await imageRow(s, declaredLater)).toMatchObject({ rating: "general", rating_source: "owner" })
    expect(await ratedEvents(s, declared)).toHaveLength(0)
    expect((await ratingChanges(s, declaredLater)).map((c) => c.source)).toEqual(["owner"])
  }, 180_000)

  it("a deleted image is skipped", async () => {
    const s = stack!
    const deleted = await publish(s, await plainWebp(), "auto", "delete")
    await waitFor(() => drained(s), { message: "the log to drain", timeoutMs: 60_000 })
    const row = await imageRow(s, deleted)
    expect(row.deleted_at).not.toBeNull()
    expect(row.rating).toBe("unrated")
    expect(row.rating_source).toBeNull()
    expect(await ratingChanges(s, deleted)).toHaveLength(0)
  }, 180_000)

  it("redelivery of the whole topic does not rate twice", async () => {
    const s = stack!
    const id = await publish(s, await plainWebp(), "auto")
    await waitFor(async () => (await imageRow(s, id)).rating !== "unrated", {
      message: "the classifier to rate the image",
      timeoutMs: 60_000
    })
    await waitFor(() => drained(s), { message: "the log to drain", timeoutMs: 60_000 })
    const before = (await s.db.query("SELECT count(*)::int AS n FROM rating_changes")).rows[0].n
    // As after a crash between the work and the offset commit: every event comes again.
    await s.db.query("UPDATE event_log_offsets SET next_offset = 0 WHERE group_id = 'image-classifier'")
    await waitFor(() => drained(s), { message: "the redelivered log to drain", timeoutMs: 60_000 })
    expect((await s.db.query("SELECT count(*)::int AS n FROM rating_changes")).rows[0].n).toBe(before)
    expect(await ratingChanges(s, id)).toHaveLength(1)
    expect(await ratedEvents(s, id)).toHaveLength(1)
  }, 180_000)
})

describe("classification worker with a failing classifier (http adapter against a local server)", () => {
  let stack: Stack | undefined
  let server: Server
  let classifyUrl: string
  const requests: Array<{ contentType: string | undefined; bytes: Buffer }> = []
  /** Images the service answers 500 for; it rates every other one nsfw. */
  const failing: Array<Buffer> = []

  const body = (req: IncomingMessage) =>
    new Promise<Buffer>((resolve) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c)).on("end", () => resolve(Buffer.concat(chunks)))
    })

  beforeAll(async () => {
    server = createServer(async (req, res) => {
      const bytes = await body(req)
      requests.push({ contentType: req.headers["content-type"], bytes })
      if (failing.some((f) => f.equals(bytes))) {
        res.writeHead(500).end("model crashed")
        return
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ rating: "nsfw" }))
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    classifyUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/classify`
    const http = Layer.succeed(
      Classifier,
      makeHttpClassifier({ url: classifyUrl, token: Option.none(), timeoutSeconds: 5 })
    )
    stack = await startStack(http, { attempts: 3, backoff: "20 millis" })
  })
  afterAll(async () => {
    await stopStack(stack)
    await new Promise((r) => server.close(r))
  })

  it("a failing classifier is retried a few times, then leaves the image ready and unrated; the worker goes on", async () => {
    const s = stack!
    const bad = await plainWebp()
    failing.push(bad)
    const badId = await publish(s, bad, "auto")
    const good = await landscapeWebp()
    const goodId = await publish(s, good, "auto")
    await waitFor(async () => (await imageRow(s, goodId)).rating !== "unrated", {
      message: "the next image to be rated",
      timeoutMs: 60_000
    })
    await waitFor(() => drained(s), { message: "the log to drain", timeoutMs: 60_000 })
    expect(await imageRow(s, badId)).toMatchObject({ status: "ready", rating: "unrated", rating_source: null })
    expect(await ratingChanges(s, badId)).toHaveLength(0)
    expect(requests.filter((r) => r.bytes.equals(bad))).toHaveLength(3)
    expect(await imageRow(s, goodId)).toMatchObject({ status: "ready", rating: "nsfw", rating_source: "classifier" })
    expect((await ratingChanges(s, goodId))[0]).toMatchObject({ actor: "classifier:http", to_rating: "nsfw" })
    expect(requests.find((r) => r.bytes.equals(good))?.contentType).toBe("image/webp")
  }, 60_000)

  it("the http adapter takes only a rating from the set as an answer", async () => {
    const answers = [
      [200, '{"rating":"unrated"}'],
      [200, "<html>ok</html>"],
      [200, '{"scores":{}}'],
      [503, '{"rating":"general"}']
    ] as const
    const local = createServer((_req, res) => {
      const [status, text] = answers[Number(_req.url!.slice(1))]!
      _req.resume()
      _req.on("end", () => res.writeHead(status, { "content-type": "application/json" }).end(text))
    })
    await new Promise<void>((r) => local.listen(0, "127.0.0.1", r))
    try {
      const base = `http://127.0.0.1:${(local.address() as AddressInfo).port}`
      const bytes = await plainWebp()
      for (let i = 0; i < answers.length; i++) {
        const c = makeHttpClassifier({ url: `${base}/${i}`, token: Option.none(), timeoutSeconds: 5 })
        const error = await Effect.runPromise(Effect.flip(c.classify(bytes)))
        expect(error._tag).toBe("ClassifierError")
      }
      const ok = makeHttpClassifier({ url: classifyUrl, token: Option.none(), timeoutSeconds: 5 })
      // (a plain card is on the suite server's failing list; a landscape is not)
      expect((await Effect.runPromise(ok.classify(await landscapeWebp()))).rating).toBe("nsfw")
    } finally {
      await new Promise((r) => local.close(r))
    }
  })

  it("an http classifier that does not answer in time is a ClassifierError", async () => {
    const silent = createServer(() => {})
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r))
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`
      const c = makeHttpClassifier({ url, token: Option.none(), timeoutSeconds: 1 })
      const error = await Effect.runPromise(Effect.flip(c.classify(await plainWebp())))
      expect(error.message).toMatch(/no answer within 1 s/)
    } finally {
      silent.closeAllConnections()
      await new Promise((r) => silent.close(r))
    }
  })
})

describe("classification worker with IMAGE_CLASSIFIER=none", () => {
  let stack: Stack | undefined
  beforeAll(async () => {
    stack = await startStack(NoneClassifierLive)
  })
  afterAll(() => stopStack(stack))

  it("nothing is classified: auto images stay unrated and the worker does not join the group", async () => {
    const s = stack!
    const id = await publish(s, await plainWebp(), "auto")
    await waitFor(
      async () => {
        const r = await s.db.query("SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL")
        return r.rows[0].n === 0
      },
      { message: "the relay to publish", timeoutMs: 60_000 }
    )
    // Deliberate: nothing may happen now, so there is no event to wait for. A worker that
    // wrongly consumed images.v1 is given half a second to rate the image or join the group.
    await new Promise((r) => setTimeout(r, 500))
    expect(await imageRow(s, id)).toMatchObject({ status: "ready", rating: "unrated", rating_source: null })
    const members = await s.db.query(
      "SELECT count(*)::int AS n FROM event_log_offsets WHERE group_id = 'image-classifier'"
    )
    expect(members.rows[0].n).toBe(0)
  })
})

describe("ClassifierLive (IMAGE_CLASSIFIER)", () => {
  const build = (env: Record<string, string>) =>
    Effect.runPromiseExit(
      Effect.scoped(
        Layer.build(ClassifierLive).pipe(
          Effect.map((ctx) => {
            const c = ctx.unsafeMap.get(Classifier.key) as { name: string; enabled: boolean }
            return { name: c.name, enabled: c.enabled }
          }),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
          Effect.provide(quiet)
        )
      )
    )

  it("none and http are chosen by name; http needs an http(s) IMAGE_CLASSIFIER_URL; other names are refused", async () => {
    expect(await build({ IMAGE_CLASSIFIER: "none" })).toEqual(Exit.succeed({ name: "none", enabled: false }))
    expect(await build({ IMAGE_CLASSIFIER: "http", IMAGE_CLASSIFIER_URL: "http://127.0.0.1:9/classify" })).toEqual(
      Exit.succeed({ name: "http", enabled: true })
    )
    expect(Exit.isFailure(await build({ IMAGE_CLASSIFIER: "http" }))).toBe(true)
    expect(Exit.isFailure(await build({ IMAGE_CLASSIFIER: "http", IMAGE_CLASSIFIER_URL: "file:///etc/passwd" }))).toBe(
      true
    )
    expect(Exit.isFailure(await build({ IMAGE_CLASSIFIER: "magic" }))).toBe(true)
  })

  it("nsfwjs is the default", async () => {
    expect(await build({})).toEqual(Exit.succeed({ name: "nsfwjs", enabled: true }))
  }, 60_000)
})
