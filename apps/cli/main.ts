import { parseArgs } from "node:util"
import { NodeRuntime } from "@effect/platform-node"
import type { PgClient } from "@effect/sql-pg"
import { ConfigError, Effect, Logger, LogLevel } from "effect"
import { isApiKeyId, KeyNotFound } from "../../domain/Account.js"
import type { StartAt } from "../../domain/EventLog.js"
import { DEFAULT_PLAN } from "../../domain/Plan.js"
import { AccountRepo } from "../../domain/ports/AccountRepo.js"
import type { Transactions } from "../../domain/ports/Database.js"
import type { DomainRepo } from "../../domain/ports/DomainRepo.js"
import type { SnapshotRepo } from "../../domain/ports/SnapshotRepo.js"
import { isScope, type Scope, Scopes } from "../../domain/Scope.js"
import { Plans } from "../../infra/Plans.js"
import { RatingReviews } from "../api/Images/RatingReviews.js"
import { withdrawSnapshot } from "../api/Snapshots/Snapshots.js"
import { Projections } from "../workers/Projections.js"
import { isAccountId, listDomains } from "./Domains.js"
import { CliLive } from "./Live.js"
import { decisionOutput, reportsOutput, reviewsOutput } from "./Reviews.js"

const USAGE = `usage: npm run cli -- <command> [options] [--json]

  accounts create --name NAME [--plan PLAN]           create an account (plan default: ${DEFAULT_PLAN})
  accounts set-plan --id ACCOUNT_ID --plan PLAN       move an account to another plan
  keys create --account ID --scopes a:b,c:d [--unmetered]
                                                      issue an API key (the secret is shown once)
  keys revoke --id KEY_ID                             revoke a key at once
  reviews list                                        pending rating reductions of hosted images
  reviews approve --id REVIEW_ID                      apply the requested (less strict) rating
  reviews reject --id REVIEW_ID                       keep the effective rating
  reports list                                        open abuse reports filed from share pages
  domains list --account ID                           the account's custom domains (state, proof, last check)
  snapshots withdraw --id SNAPSHOT_ID                 stop serving a snapshot at once (it reads withdrawn)
  migrate                                             apply database migrations
  replay --topic clicks.v1 [--from-offset N | --from-time ISO] --into analytics
                                                      rebuild a projection from its topic (default: from
                                                      the beginning; an offset applies to every partition)

Projections: ${Object.entries(Projections)
  .map(([into, topic]) => `${into} (from ${topic})`)
  .join(", ")}. Replay swaps the rebuilt tables in when it is done;
stop the click projector first (the service, with the embedded analytics store: it holds DATA_DIR/clickhouse).

Scopes: ${Scopes.join(", ")}
Plans: the built-in free, pro and business, with PLANS (JSON) merged over them; run the CLI
with the same PLANS as the service.
Connects to DATABASE_URL, or to the embedded PostgreSQL under DATA_DIR (the running one if the
service is up).`

class UsageError extends Error {}

/** What the commands need: the accounts, the rating reviews, the plan table (and for replay, the database). */
type Env = AccountRepo | RatingReviews | DomainRepo | Plans | PgClient.PgClient | SnapshotRepo | Transactions

const { values, positionals } = parseArgs({
  allowPositionals: true,
  strict: false,
  options: {
    name: { type: "string" },
    plan: { type: "string" },
    account: { type: "string" },
    scopes: { type: "string" },
    unmetered: { type: "boolean" },
    id: { type: "string" },
    topic: { type: "string" },
    into: { type: "string" },
    "from-offset": { type: "string" },
    "from-time": { type: "string" },
    json: { type: "boolean" },
    help: { type: "boolean", short: "h" }
  }
})

const str = (name: string): string => {
  const v = values[name]
  if (typeof v !== "string" || v.trim() === "") throw new UsageError(`--${name} is required`)
  return v.trim()
}

const parseScopes = (raw: string): Array<Scope> => {
  const list = raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
  const unknown = list.filter((s) => !isScope(s))
  if (unknown.length > 0) throw new UsageError(`unknown scope(s): ${unknown.join(", ")}; valid: ${Scopes.join(", ")}`)
  if (list.length === 0) throw new UsageError("--scopes needs at least one scope")
  return [...new Set(list)] as Array<Scope>
}

const parseStartAt = (): StartAt => {
  const offset = values["from-offset"] === undefined ? undefined : str("from-offset")
  const time = values["from-time"] === undefined ? undefined : str("from-time")
  if (offset !== undefined && time !== undefined) throw new UsageError("give --from-offset or --from-time, not both")
  if (offset !== undefined) {
    if (!/^\d{1,15}$/.test(offset)) throw new UsageError("--from-offset must be a non-negative integer")
    return { _tag: "Offset", offset: Number(offset) }
  }
  if (time !== undefined) {
    if (!/^\d{4}-\d{2}-\d{2}(T.*(Z|[+-]\d{2}:?\d{2}))?$/.test(time) || Number.isNaN(Date.parse(time))) {
      throw new UsageError("--from-time must be an ISO 8601 date or a date-time with an offset")
    }
    return { _tag: "Time", time: new Date(time) }
  }
  return { _tag: "Beginning" }
}

const command = (): Effect.Effect<unknown, unknown, Env> => {
  const [area, verb] = positionals
  switch (`${area} ${verb ?? ""}`.trim()) {
    case "accounts create": {
      const name = str("name")
      const plan = values.plan === undefined ? DEFAULT_PLAN : str("plan")
      return Plans.pipe(
        Effect.flatMap((plans) => plans.check(plan)),
        Effect.zipRight(Effect.flatMap(AccountRepo, (a) => a.createAccount({ name, plan })))
      )
    }
    case "accounts set-plan": {
      const accountId = str("id")
      const plan = str("plan")
      return Plans.pipe(
        Effect.flatMap((plans) => plans.check(plan)),
        Effect.zipRight(Effect.flatMap(AccountRepo, (a) => a.setPlan({ accountId, plan })))
      )
    }
    case "keys create": {
      const accountId = str("account")
      const scopes = parseScopes(str("scopes"))
      const unmetered = values.unmetered === true
      return Effect.flatMap(AccountRepo, (a) => a.createKey({ accountId, scopes, unmetered }))
    }
    case "keys revoke": {
      const id = str("id")
      // An id of another shape names no key: the same answer as an unknown one.
      return isApiKeyId(id) ? Effect.flatMap(AccountRepo, (a) => a.revokeKey(id)) : Effect.fail(new KeyNotFound({ id }))
    }
    case "reviews list":
      return Effect.flatMap(RatingReviews, (r) => r.pending()).pipe(Effect.map(reviewsOutput))
    case "reviews approve": {
      const id = str("id")
      return Effect.flatMap(RatingReviews, (r) => r.decide(id, "approved")).pipe(Effect.map(decisionOutput))
    }
    case "reviews reject": {
      const id = str("id")
      return Effect.flatMap(RatingReviews, (r) => r.decide(id, "rejected")).pipe(Effect.map(decisionOutput))
    }
    case "reports list":
      return Effect.flatMap(RatingReviews, (r) => r.openReports()).pipe(Effect.map(reportsOutput))
    case "domains list": {
      const accountId = str("account")
      if (!isAccountId(accountId)) throw new UsageError("--account must be an account id (acct_…)")
      return listDomains(accountId)
    }
    case "snapshots withdraw": {
      const id = str("id")
      return withdrawSnapshot(id).pipe(
        Effect.map((s) => ({ id: s.id, capture_status: s.captureStatus, publication_status: s.publicationStatus }))
      )
    }
    case "migrate":
      // Building the database layer applies every pending migration.
      return Effect.succeed({ migrated: true })
    case "replay": {
      const options = { topic: str("topic"), into: str("into"), startAt: parseStartAt() }
      // Only replay opens the analytics store and the event log: the other commands work while the service runs.
      // Loaded for replay only: the event log and analytics clients cost every other command its start time.
      return Effect.promise(() => Promise.all([import("../workers/Replay.js"), import("./ReplayLive.js")])).pipe(
        Effect.flatMap(([{ replay }, { ReplayLive }]) => replay(options).pipe(Effect.provide(ReplayLive)))
      )
    }
    default:
      throw new UsageError(area === undefined ? "a command is required" : `unknown command: ${positionals.join(" ")}`)
  }
}

const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, values.json ? 0 : 2)}\n`)
const printError = (code: string, message: string) => {
  process.stderr.write(`${JSON.stringify({ error: { code, message } })}\n`)
  process.exitCode = code === "usage" ? 2 : 1
}

if (values.help === true) {
  process.stdout.write(`${USAGE}\n`)
} else {
  let program: Effect.Effect<unknown, unknown, Env>
  try {
    program = command()
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    printError("usage", `${e.message}\n${USAGE}`)
    program = Effect.void
  }
  if (process.exitCode === undefined) {
    NodeRuntime.runMain(
      program.pipe(
        Effect.tap(print),
        Effect.catchAll((e) =>
          Effect.sync(() => {
            const failure: { readonly _tag?: unknown; readonly message?: unknown; readonly id?: unknown } =
              typeof e === "object" && e !== null ? e : {}
            const tag = typeof failure._tag === "string" ? failure._tag : "error"
            const code = tag.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase()
            const message = typeof failure.message === "string" ? failure.message : ""
            printError(code, message || `${tag}${failure.id ? `: ${String(failure.id)}` : ""}`)
          })
        ),
        Effect.provide(CliLive),
        // A bad setting (PLANS among them) while building the layer: one line naming it.
        Effect.catchIf(ConfigError.isConfigError, (e) =>
          Effect.sync(() => printError("configuration_error", String(e)))
        ),
        Effect.provide(Logger.minimumLogLevel(LogLevel.Warning)),
        Effect.catchAllCause((cause) => Effect.sync(() => printError("failed", String(cause))))
      ),
      { disablePrettyLogger: true, disableErrorReporting: true }
    )
  }
}
