import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
import { ApiHttpLive } from "../../apps/api/Live.js"
import { ClickProjectorLive } from "../../apps/workers/ClickProjector.js"
import type { ApiKeyId } from "../../domain/Account.js"
import { EventLog, type OutgoingRecord } from "../../domain/EventLog.js"
import type { PlanLimits } from "../../domain/Plan.js"
import { AccountRepo } from "../../domain/ports/AccountRepo.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { ImageJobRepo } from "../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import type { Scope } from "../../domain/Scope.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { ChdbAnalyticsLive } from "../../infra/analytics/Chdb.js"
import { ClickHouseServerAnalyticsLive } from "../../infra/analytics/ClickHouseServer.js"
import { makeFsBlobStore } from "../../infra/blobstore/FsBlobStore.js"
import { codecLayer } from "../../infra/codec/ImageCodec.js"
import { DatabaseLive } from "../../infra/Database.js"
import { dnsResolverLayer } from "../../infra/dns/DnsResolver.js"
import { EmbeddedEventLogLive } from "../../infra/eventlog/Embedded.js"
import { type SafeFetcherOptions, safeFetcherLayer } from "../../infra/fetcher/SafeFetcher.js"
import { Plans } from "../../infra/Plans.js"
import { AccountRepoLive } from "../../infra/postgres/Accounts.js"
import { ImageReposLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { createTestDatabase, dropTestDatabase } from "./database.js"

export interface TestApi {
  readonly baseUrl: string
  /** {base_url}: the origin plus /v1 */
  readonly api: string
  readonly databaseUrl: string
  readonly newAccount: (
    scopes?: ReadonlyArray<Scope>,
    options?: { unmetered?: boolean; plan?: string }
  ) => Promise<TestAccount>
  readonly newKey: (
    accountId: string,
    scopes: ReadonlyArray<Scope>,
    options?: { unmetered?: boolean }
  ) => Promise<string>
  /** Moves an account to another plan (no check against the plan table: that is the CLI's). */
  readonly setPlan: (accountId: string, plan: string) => Promise<void>
  readonly revokeKey: (keyId: ApiKeyId) => Promise<void>
  /** Runs an effect against the image repositories of the test API's database (e.g. to mark an image ready). */
  readonly withImages: <A, E>(f: (repos: ImageRepos) => Effect.Effect<A, E>) => Promise<A>
  /** Publishes to the embedded event log (only with `clickProjector: true`). */
  readonly publish: (topic: string, records: ReadonlyArray<OutgoingRecord>) => Promise<void>
  readonly close: () => Promise<void>
}

export interface ImageRepos {
  readonly images: ImageRepo["Type"]
  readonly jobs: ImageJobRepo["Type"]
}

export interface TestAccount {
  readonly accountId: string
  readonly keyId: ApiKeyId
  readonly key: string
}

export const ALL_SCOPES: ReadonlyArray<Scope> = [
  "links:read",
  "links:write",
  "snapshots:read",
  "snapshots:write",
  "images:read",
  "images:write",
  "analytics:read",
  "domains:read",
  "domains:write"
]

export interface TestApiOptions {
  readonly shortBase?: string
  /** Plans merged over the built-in table (PLANS is not read): e.g. `{ tiny: { links_per_month: 3 } }`. */
  readonly plans?: Record<string, Partial<PlanLimits>>
  /** The analytics store: chDB in a temp dir (default), or the server at TEST_CLICKHOUSE_URL. */
  readonly analytics?: "chdb" | "clickhouse"
  /** Also run the embedded event log and the click projector (clicks published with `publish` reach the API). */
  readonly clickProjector?: boolean
  /** PUBLIC_IMAGE_HOST of the test API (default: the built-in http://localhost:8082). */
  readonly imageHost?: string
  /**
   * The SafeFetcher of URL imports. Default: loopback allowed (so tests can import from a
   * local server), the configured public hosts as its own; every other refused range stays refused.
   */
  readonly fetcher?: SafeFetcherOptions
  /** The resolvers of domain verification (`host:port`, e.g. a test dnsmasq); default the system's. */
  readonly dnsServers?: ReadonlyArray<string>
  /** The bound of one DNS lookup (ms); default 3000. */
  readonly dnsTimeoutMs?: number
  /** The file blob store's directory (default: a fresh temporary one, removed on close; a given one is kept). */
  readonly blobDir?: string
}

let chdbDir: string | undefined
let chdbApis = 0
/** libchdb opens one data directory per process: every store of a test file shares one, each in its own database. */
export const testChdbDir = () => {
  chdbDir ??= fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-chdb-"))
  return chdbDir
}
/**
 * Deletes the process's chDB directory: call it once every store on it is closed (vitest
 * ends its workers without running exit handlers, so nothing else would).
 */
export const removeTestChdbDir = () => {
  if (chdbDir !== undefined) fs.rmSync(chdbDir, { recursive: true, force: true })
  chdbDir = undefined
}

/** TEST_CLICKHOUSE_URL, or undefined when unset (suites needing the server are skipped). */
export const testClickHouseUrl = (): string | undefined => {
  const url = process.env.TEST_CLICKHOUSE_URL?.trim()
  return url === undefined || url === "" ? undefined : url
}

/** A database name no other test run uses. */
export const uniqueDatabase = (prefix = "t") => `${prefix}_${randomBytes(6).toString("hex")}`

const testAnalyticsLayer = (engine: "chdb" | "clickhouse", database: string) => {
  if (engine === "chdb") return ChdbAnalyticsLive(testChdbDir(), database)
  const url = testClickHouseUrl()
  if (url === undefined) throw new Error("TEST_CLICKHOUSE_URL is not set")
  return ClickHouseServerAnalyticsLive(url, database)
}

/** Drops a test database on the ClickHouse server (chDB's go with the temp dir). */
const dropClickHouseDatabase = async (database: string) => {
  const url = testClickHouseUrl()
  if (url === undefined) return
  await fetch(`${new URL(url).origin}/`, { method: "POST", body: `DROP DATABASE IF EXISTS ${database}` })
}

/** The real API (pipeline, handlers, PostgreSQL) on a random port, against a fresh database. */
export const startTestApi = async (overrides: TestApiOptions = {}): Promise<TestApi> => {
  const databaseUrl = await createTestDatabase()
  const config = AppConfig.make({
    databaseUrl: Option.some(Redacted.make(databaseUrl)),
    shortBase: overrides.shortBase ?? "http://sho.rt",
    ...(overrides.imageHost === undefined ? {} : { imageHost: overrides.imageHost })
  })
  const blobDir = overrides.blobDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-blobs-"))
  const analyticsEngine = overrides.analytics ?? "chdb"
  const analyticsDatabase = uniqueDatabase()
  if (analyticsEngine === "chdb") chdbApis++
  const workers = overrides.clickProjector
    ? ClickProjectorLive.pipe(Layer.provideMerge(EmbeddedEventLogLive))
    : (Layer.empty as unknown as Layer.Layer<EventLog>)
  const fetcher = safeFetcherLayer({
    allowLoopback: true,
    ownHosts: [
      overrides.shortBase ?? "http://sho.rt",
      overrides.imageHost ?? "http://localhost:8082",
      "http://localhost:8080"
    ].map((base) => new URL(base).host),
    ...overrides.fetcher
  })
  const layer = Layer.merge(ApiHttpLive, workers).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
    // The API only probes image headers: no converter process is started.
    Layer.provide(codecLayer({ concurrency: 1 })),
    Layer.provide(fetcher),
    Layer.provide(dnsResolverLayer({ servers: overrides.dnsServers ?? [], timeoutMs: overrides.dnsTimeoutMs ?? 3000 })),
    // Uploads keep their private source here until a conversion worker (not run here) takes it.
    Layer.provideMerge(Layer.succeed(BlobStore, makeFsBlobStore(blobDir))),
    Layer.provideMerge(AccountRepoLive),
    Layer.provideMerge(ImageReposLive.pipe(Layer.provide(OutboxLive))),
    Layer.provide(testAnalyticsLayer(analyticsEngine, analyticsDatabase)),
    Layer.provideMerge(DatabaseLive),
    Layer.provide(config),
    Layer.provide(Plans.make(overrides.plans)),
    // Request lines are tested where they matter (test/e2e); here they would drown the report.
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )
  const runtime = ManagedRuntime.make(layer)
  const server = await runtime.runPromise(HttpServer.HttpServer)
  const address = server.address as HttpServer.TcpAddress
  const baseUrl = `http://127.0.0.1:${address.port}`
  const run = <A, E>(effect: Effect.Effect<A, E, AccountRepo>) => runtime.runPromise(effect)
  const newKey = (accountId: string, scopes: ReadonlyArray<Scope>, unmetered = false) =>
    run(Effect.flatMap(AccountRepo, (a) => a.createKey({ accountId, scopes, unmetered })))
  return {
    baseUrl,
    api: `${baseUrl}/v1`,
    databaseUrl,
    newAccount: async (scopes = ALL_SCOPES, options = {}) => {
      const plan = options.plan ?? "free"
      const account = await run(Effect.flatMap(AccountRepo, (a) => a.createAccount({ name: "test", plan })))
      const key = await newKey(account.id, scopes, options.unmetered ?? false)
      return { accountId: account.id, keyId: key.id, key: key.key }
    },
    newKey: async (accountId, scopes, options = {}) =>
      (await newKey(accountId, scopes, options.unmetered ?? false)).key,
    setPlan: async (accountId, plan) => {
      await run(Effect.flatMap(AccountRepo, (a) => a.setPlan({ accountId, plan })))
    },
    withImages: (f) => runtime.runPromise(Effect.flatMap(Effect.all({ images: ImageRepo, jobs: ImageJobRepo }), f)),
    revokeKey: async (keyId) => {
      await run(Effect.flatMap(AccountRepo, (a) => a.revokeKey(keyId)))
    },
    publish: async (topic, records) => {
      if (!overrides.clickProjector) throw new Error("startTestApi({ clickProjector: true }) publishes")
      await runtime.runPromise(Effect.flatMap(EventLog, (log) => log.publish(topic, records)))
    },
    close: async () => {
      await runtime.dispose()
      await dropTestDatabase(databaseUrl)
      if (overrides.blobDir === undefined) fs.rmSync(blobDir, { recursive: true, force: true })
      if (analyticsEngine === "clickhouse") await dropClickHouseDatabase(analyticsDatabase)
      else if (--chdbApis === 0) removeTestChdbDir()
    }
  }
}

let counter = 0
/** A fresh Idempotency-Key. */
export const idem = () => `test-key-${Date.now()}-${counter++}-${Math.random().toString(36).slice(2)}`

export interface Call {
  readonly method?: string
  readonly key?: string
  readonly body?: unknown
  readonly rawBody?: string
  readonly contentType?: string
  readonly idempotencyKey?: string | null
  readonly headers?: Record<string, string>
}

/** What `call` returns: `json` is the parsed body (undefined when it is not JSON). */
export interface Reply<B = unknown> {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: B
}

/**
 * One HTTP call; a mutating call gets a fresh Idempotency-Key unless told otherwise.
 * `B` is the body the test expects (e.g. `Envelope<Link>`, see ./resources.ts): declared, not
 * validated; the test's own assertions check what it reads. Unknown unless said.
 */
export const call = async <B = unknown>(url: string, c: Call = {}): Promise<Reply<B>> => {
  const method = c.method ?? "GET"
  const headers: Record<string, string> = { ...c.headers }
  if (c.key !== undefined) headers.authorization = `Bearer ${c.key}`
  if (method !== "GET" && c.idempotencyKey !== null) headers["idempotency-key"] = c.idempotencyKey ?? idem()
  let body: string | undefined
  if (c.rawBody !== undefined) body = c.rawBody
  else if (c.body !== undefined) body = JSON.stringify(c.body)
  if (body !== undefined) headers["content-type"] = c.contentType ?? "application/json"
  const res = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) })
  const text = await res.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  // The body as the caller declares it (see above).
  return { status: res.status, headers: res.headers, text, json: json as B }
}
