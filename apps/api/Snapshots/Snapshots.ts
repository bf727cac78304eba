import { Clock, Effect, Either, Option, Runtime } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { NotFound, QuotaExceeded, UrlNotAllowed } from "../../../domain/Errors.js"
import { quotaDetail, snapshotHostQuota, snapshotQuota, usagePeriod } from "../../../domain/Plan.js"
import { BlobStore } from "../../../domain/ports/BlobStore.js"
import { Transactions } from "../../../domain/ports/Database.js"
import { SafeFetcher } from "../../../domain/ports/SafeFetcher.js"
import { SnapshotRepo, type SnapshotRepoShape } from "../../../domain/ports/SnapshotRepo.js"
import { UsageRepo } from "../../../domain/ports/UsageRepo.js"
import { isSnapshotId, SnapshotId, snapshotBlobKey, snapshotHostOf } from "../../../domain/Snapshot.js"
import { AppConfig } from "../../../infra/AppConfig.js"
import { newId } from "../../../infra/Ids.js"
import { Plans } from "../../../infra/Plans.js"
import { buildWarc } from "../../../infra/snapshots/Warc.js"

const notFound = new NotFound({ message: "No such snapshot." })

/** The caller's snapshot, or NotFound (another account's and a malformed id too). */
const owned = (repo: SnapshotRepoShape, principal: Principal, id: string) =>
  Effect.flatMap(
    isSnapshotId(id) ? repo.find(principal.accountId, id) : Effect.succeedNone,
    Option.match({ onNone: () => Effect.fail(notFound), onSome: Effect.succeed })
  )

/**
 * An operator's withdrawal (`cli snapshots withdraw`), in its own transaction: the snapshot
 * host answers 404 from the next request on. Withdrawing twice changes nothing.
 */
export const withdrawSnapshot = (id: string) =>
  Effect.gen(function* () {
    const repo = yield* SnapshotRepo
    const transactions = yield* Transactions
    const withdrawn = isSnapshotId(id) ? yield* transactions.withTransaction(repo.withdraw(id)) : Option.none()
    if (Option.isNone(withdrawn)) return yield* notFound
    return withdrawn.value
  })

/**
 * Snapshots: the use cases the API and the CLI share. Creating checks what can be checked
 * at once (syntax by the schema; scheme, credentials, the service's own hosts and literal
 * private addresses here, by the SafeFetcher's rules); name resolution and fetching happen
 * in the capture worker (apps/workers/SnapshotCapture.ts). Writes run in the caller's
 * transaction. The CLI withdraws with `withdrawSnapshot`.
 */
export class Snapshots extends Effect.Service<Snapshots>()("Snapshots", {
  effect: Effect.gen(function* () {
    const repo = yield* SnapshotRepo
    const usage = yield* UsageRepo
    const plans = yield* Plans
    const fetcher = yield* SafeFetcher
    const blobs = yield* BlobStore
    const config = yield* AppConfig

    const checkUrl = (url: string) =>
      (fetcher.precheck?.(url) ?? Effect.void).pipe(
        Effect.mapError(
          (e) =>
            new UrlNotAllowed({
              message: "The URL is not allowed for a server-side fetch.",
              reason: `url: ${e.reason}`
            })
        )
      )

    /** Captures of one host in progress for the account (queued or capturing): the plan's snapshot_captures_per_host. */
    const checkHostLimit = (principal: Principal, host: string) =>
      Effect.gen(function* () {
        const limit = snapshotHostQuota(plans.limits(principal.plan), principal.unmetered)
        if (limit === null) return
        const inProgress = yield* repo.inProgressForHost(principal.accountId, host)
        if (inProgress < limit) return
        return yield* new QuotaExceeded({
          message: `Too many captures of ${host} in progress for this account (plan ${principal.plan}); retry once one ends.`,
          detail: `snapshot_captures_per_host: ${inProgress} of ${limit} in progress for ${host}`
        })
      })

    const create = Effect.fn("Snapshots.create")(function* (principal: Principal, url: string) {
      yield* checkUrl(url)
      const host = snapshotHostOf(url)
      yield* checkHostLimit(principal, host)
      const period = usagePeriod(new Date(yield* Clock.currentTimeMillis))
      const limit = snapshotQuota(plans.limits(principal.plan), principal.unmetered)
      const insert = repo.insert({
        id: SnapshotId.make(newId("snap")),
        accountId: principal.accountId,
        url,
        host,
        unmetered: principal.unmetered
      })
      const created = yield* usage.counted(principal.accountId, period, "snapshots", limit, insert)
      if (Either.isRight(created)) return created.right
      return yield* new QuotaExceeded({
        message: `The plan's monthly snapshot quota is used up (plan ${principal.plan}, ${period} UTC).`,
        detail: quotaDetail("snapshots_per_month", created.left, limit ?? 0)
      })
    })

    const get = Effect.fn("Snapshots.get")((principal: Principal, id: string) => owned(repo, principal, id))

    const list = Effect.fn("Snapshots.list")(
      (principal: Principal, search: { readonly afterSeq?: bigint | undefined; readonly limit: number }) =>
        repo.search(principal.accountId, search)
    )

    /** The capture as WARC/1.1; NotFound until it is captured. */
    const warc = Effect.fn("Snapshots.warc")(function* (principal: Principal, id: string) {
      const snapshot = yield* owned(repo, principal, id)
      const manifest = yield* repo.manifest(snapshot.id)
      if (Option.isNone(manifest)) {
        return yield* new NotFound({
          message: "The snapshot has no capture to export.",
          detail: `capture_status: ${snapshot.captureStatus} (a WARC exists once it is captured)`
        })
      }
      const load = (sha256: string) =>
        blobs
          .get(snapshotBlobKey(sha256))
          .pipe(
            Effect.flatMap(
              Option.match({ onNone: () => Effect.dieMessage(`blob ${sha256} is missing`), onSome: Effect.succeed })
            )
          )
      const runtime = yield* Effect.runtime<never>()
      const bytes = yield* Effect.promise(() =>
        buildWarc(
          manifest.value,
          (entry) => Runtime.runPromise(runtime)(Effect.orDie(load(entry.sha256))),
          `${snapshot.id}.warc`
        )
      )
      return { snapshot, bytes }
    })

    return { create, get, list, warc, snapshotHost: config.snapshotHost, apiBase: config.apiBase } as const
  })
}) {}
