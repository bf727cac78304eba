import { createServer } from "node:http"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
import { ApiHttpLive } from "../../apps/api/Server.js"
import type { PlanLimits } from "../../domain/Plan.js"
import type { Scope } from "../../domain/Scope.js"
import { Accounts } from "../../infra/Accounts.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { DatabaseLive } from "../../infra/Database.js"
import { Plans } from "../../infra/Plans.js"
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
  readonly revokeKey: (keyId: string) => Promise<void>
  readonly close: () => Promise<void>
}

export interface TestAccount {
  readonly accountId: string
  readonly keyId: string
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
}

/** The real API (pipeline, handlers, PostgreSQL) on a random port, against a fresh database. */
export const startTestApi = async (overrides: TestApiOptions = {}): Promise<TestApi> => {
  const databaseUrl = await createTestDatabase()
  const config = AppConfig.make({
    databaseUrl: Option.some(Redacted.make(databaseUrl)),
    shortBase: overrides.shortBase ?? "http://sho.rt"
  })
  const layer = ApiHttpLive.pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
    Layer.provideMerge(Accounts.layer),
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
  const run = <A, E>(effect: Effect.Effect<A, E, Accounts>) => runtime.runPromise(effect)
  const newKey = (accountId: string, scopes: ReadonlyArray<Scope>, unmetered = false) =>
    run(Effect.flatMap(Accounts, (a) => a.createKey({ accountId, scopes, unmetered })))
  return {
    baseUrl,
    api: `${baseUrl}/v1`,
    databaseUrl,
    newAccount: async (scopes = ALL_SCOPES, options = {}) => {
      const plan = options.plan ?? "free"
      const account = await run(Effect.flatMap(Accounts, (a) => a.createAccount({ name: "test", plan })))
      const key = await newKey(account.id, scopes, options.unmetered ?? false)
      return { accountId: account.id, keyId: key.id, key: key.key }
    },
    newKey: async (accountId, scopes, options = {}) =>
      (await newKey(accountId, scopes, options.unmetered ?? false)).key,
    setPlan: async (accountId, plan) => {
      await run(Effect.flatMap(Accounts, (a) => a.setPlan({ accountId, plan })))
    },
    revokeKey: async (keyId) => {
      await run(Effect.flatMap(Accounts, (a) => a.revokeKey(keyId)))
    },
    close: async () => {
      await runtime.dispose()
      await dropTestDatabase(databaseUrl)
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

/** One HTTP call; a mutating call gets a fresh Idempotency-Key unless told otherwise. */
export const call = async (url: string, c: Call = {}) => {
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
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.status, headers: res.headers, text, json }
}
