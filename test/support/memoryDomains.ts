import { Effect, Layer, Option } from "effect"
import type { AccountId } from "../../domain/Account.js"
import { Domain, DomainRecord } from "../../domain/Domain.js"
import { DnsResolver } from "../../domain/ports/DnsResolver.js"
import { DomainRepo } from "../../domain/ports/DomainRepo.js"

/** The in-memory domains table: insertion order is `seq`. */
export interface DomainWorld {
  readonly rows: Array<DomainRecord>
  /** TXT records: name -> values; a name in `timeouts` times out. */
  readonly txt: Map<string, ReadonlyArray<string>>
  readonly timeouts: Set<string>
}

export const emptyDomainWorld = (): DomainWorld => ({ rows: [], txt: new Map(), timeouts: new Set() })

const live = (d: Domain) => d.state !== "disabled"

/** DomainRepo over the world (no transactions: each call applies at once). */
export const memoryDomainRepo = (world: DomainWorld) =>
  DomainRepo.of({
    insert: (d) =>
      Effect.sync(() => {
        if (world.rows.some((r) => live(r) && r.hostname === d.hostname)) return Option.none()
        const now = new Date()
        const row = new DomainRecord({ ...d, createdAt: now, updatedAt: now, seq: BigInt(world.rows.length + 1) })
        world.rows.push(row)
        return Option.some(new Domain({ ...row }, true))
      }),
    find: (accountId, id) =>
      Effect.sync(() => Option.fromNullable(world.rows.find((r) => r.id === id && r.accountId === accountId))),
    findForUpdate: (accountId, id) =>
      Effect.sync(() => Option.fromNullable(world.rows.find((r) => r.id === id && r.accountId === accountId))),
    update: (id, c) =>
      Effect.sync(() => {
        const i = world.rows.findIndex((r) => r.id === id)
        const row = new DomainRecord({ ...world.rows[i]!, ...c, updatedAt: new Date() })
        world.rows[i] = row
        return row
      }),
    list: (accountId, o) =>
      Effect.sync(() =>
        world.rows
          .filter((r) => r.accountId === accountId && (o.afterSeq === undefined || r.seq < o.afterSeq))
          .reverse()
          .slice(0, o.limit)
      ),
    countActive: (accountId) =>
      Effect.sync(() => world.rows.filter((r) => r.accountId === accountId && live(r)).length),
    countRegisteredSince: (accountId, since) =>
      Effect.sync(() => world.rows.filter((r) => r.accountId === accountId && r.createdAt > since).length),
    lockAccount: () => Effect.void,
    verifiedHostnames: (accountId: AccountId) =>
      Effect.sync(() =>
        world.rows.filter((r) => r.accountId === accountId && r.state === "verified").map((r) => r.hostname)
      ),
    findVerified: (accountId, hostname) =>
      Effect.sync(() =>
        Option.fromNullable(
          world.rows.find((r) => r.accountId === accountId && r.hostname === hostname && r.state === "verified")
        )
      ),
    allVerified: Effect.sync(() => world.rows.filter((r) => r.state === "verified")),
    whileSweeping: (sweep) => Effect.asSome(sweep),
    dueForRecheck: (before, limit) =>
      Effect.sync(() =>
        world.rows
          .filter((r) => r.state === "verified" && (r.lastCheckedAt === null || r.lastCheckedAt < before))
          .slice(0, limit)
      )
  })

/** A resolver answering from the world's TXT records. */
export const memoryDnsResolver = (world: DomainWorld) =>
  DnsResolver.of({
    txt: (name) =>
      Effect.sync(() => {
        if (world.timeouts.has(name)) return { _tag: "Timeout" } as const
        const values = world.txt.get(name)
        return values === undefined ? ({ _tag: "NoRecord" } as const) : ({ _tag: "Found", values } as const)
      })
  })

export const memoryDomainsLayer = (world: DomainWorld = emptyDomainWorld()) =>
  Layer.merge(Layer.succeed(DomainRepo, memoryDomainRepo(world)), Layer.succeed(DnsResolver, memoryDnsResolver(world)))
