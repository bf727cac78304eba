import { createHash, timingSafeEqual } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option } from "effect"
import {
  AccountId,
  AccountNotFound,
  API_KEY_FORMAT,
  ApiKeyId,
  KeyNotFound,
  type Principal
} from "../../domain/Account.js"
import { AccountRepo } from "../../domain/ports/AccountRepo.js"
import type { Scope } from "../../domain/Scope.js"
import { BoundedCache } from "../BoundedCache.js"
import { newId, randomBase62 } from "../Ids.js"
import { listenInBackground } from "./Listen.js"

// Only the SHA-256 of a key's secret is stored, and it is compared in constant time.
const sha256 = (s: string) => createHash("sha256").update(s).digest()

const REVOKED_CHANNEL = "api_keys_revoked"
const CACHE_TTL_MS = 10_000
const CACHE_MAX = 50_000

interface Cached {
  readonly principal: Principal
  readonly hash: Buffer
  readonly at: number
}

const make = (options: { readonly cache: boolean }) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient
    const cache = new BoundedCache<string, Cached>({ maxWeight: CACHE_MAX })

    if (options.cache) {
      // Revocations (and plan changes, for each key of the account) reach every API process
      // at once through NOTIFY; the TTL bounds staleness
      // should the listening connection drop, and a reconnect starts from an empty cache.
      yield* listenInBackground(
        sql,
        REVOKED_CHANNEL,
        yield* Effect.scope,
        (keyId) => cache.delete(keyId),
        () => cache.clear()
      )
    }

    const createAccount = (input: { readonly name: string; readonly plan: string }) =>
      Effect.gen(function* () {
        const id = AccountId.make(newId("acct"))
        yield* sql`INSERT INTO accounts (id, name, plan) VALUES (${id}, ${input.name}, ${input.plan})`
        return { id, name: input.name, plan: input.plan }
      })

    /**
     * Moves an account to another plan. The account's keys leave every API process's cache
     * at once, through the same notification a revocation sends, so the new plan applies
     * from the next request.
     */
    const setPlan = (input: { readonly accountId: string; readonly plan: string }) =>
      Effect.gen(function* () {
        const rows = yield* sql`UPDATE accounts SET plan = ${input.plan} WHERE id = ${input.accountId} RETURNING id`
        if (rows.length === 0) return yield* new AccountNotFound({ id: input.accountId })
        const keys = yield* sql<{ id: string }>`
        SELECT k.id, pg_notify(${REVOKED_CHANNEL}, k.id) FROM api_keys k
        WHERE k.account_id = ${input.accountId} AND k.revoked_at IS NULL`
        for (const key of keys) cache.delete(key.id)
        return { id: input.accountId, plan: input.plan }
      }).pipe(sql.withTransaction)

    const createKey = (input: {
      readonly accountId: string
      readonly scopes: ReadonlyArray<Scope>
      readonly unmetered: boolean
    }) =>
      Effect.gen(function* () {
        const account = yield* sql`SELECT id FROM accounts WHERE id = ${input.accountId}`
        if (account.length === 0) return yield* new AccountNotFound({ id: input.accountId })
        const idPart = randomBase62(22)
        const secret = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")
        const id = ApiKeyId.make(`key_${idPart}`)
        yield* sql`
        INSERT INTO api_keys (id, account_id, secret_hash, scopes, unmetered)
        VALUES (${id}, ${input.accountId}, ${sha256(secret)}, string_to_array(${input.scopes.join(",")}, ','), ${input.unmetered})`
        return { id, key: `sk_${idPart}_${secret}`, scopes: input.scopes, unmetered: input.unmetered }
      })

    const revokeKey = (id: ApiKeyId) =>
      Effect.gen(function* () {
        const rows = yield* sql`
        UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = ${id} RETURNING id, revoked_at`
        if (rows.length === 0) return yield* new KeyNotFound({ id })
        yield* sql`SELECT pg_notify(${REVOKED_CHANNEL}, ${id})`
        cache.delete(id)
        return { id, revoked_at: (rows[0]!.revoked_at as Date).toISOString() }
      }).pipe(sql.withTransaction)

    const authenticate = (token: string): Effect.Effect<Option.Option<Principal>> => {
      const match = API_KEY_FORMAT.exec(token)
      if (match === null) return Effect.succeedNone
      const [, idPart, secret] = match
      const keyId = ApiKeyId.make(`key_${idPart}`)
      const hash = sha256(secret!)
      const hit = cache.get(keyId)
      if (hit !== undefined && Date.now() - hit.at < CACHE_TTL_MS) {
        return Effect.succeed(timingSafeEqual(hit.hash, hash) ? Option.some(hit.principal) : Option.none())
      }
      return sql<{
        account_id: string
        secret_hash: Buffer
        scopes: Array<string>
        unmetered: boolean
        plan: string
      }>`
      SELECT k.account_id, k.secret_hash, k.scopes, k.unmetered, a.plan
      FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE k.id = ${keyId} AND k.revoked_at IS NULL`.pipe(
        Effect.map((rows) => {
          const row = rows[0]
          if (row === undefined) return Option.none()
          const principal: Principal = {
            keyId,
            accountId: AccountId.make(row.account_id),
            plan: row.plan,
            scopes: new Set(row.scopes),
            unmetered: row.unmetered
          }
          if (options.cache) cache.set(keyId, { principal, hash: row.secret_hash, at: Date.now() })
          return timingSafeEqual(row.secret_hash, hash) ? Option.some(principal) : Option.none()
        }),
        Effect.orDie
      )
    }

    return AccountRepo.of({ createAccount, setPlan, createKey, revokeKey, authenticate })
  })

/** Every lookup reads the database: for the CLI and other short-lived callers. */
export const AccountRepoLive: Layer.Layer<AccountRepo, never, PgClient.PgClient> = Layer.scoped(
  AccountRepo,
  make({ cache: false })
)

/** Valid keys cached for 10 s, evicted at once on revocation (LISTEN/NOTIFY): for the API. */
export const AccountRepoCachedLive: Layer.Layer<AccountRepo, never, PgClient.PgClient> = Layer.scoped(
  AccountRepo,
  make({ cache: true })
)
