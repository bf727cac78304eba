import { Chunk, Clock, Effect, Either, Layer, Option, Schema, Stream } from "effect"
import { AccountId, ApiKeyId, type Principal } from "../../domain/Account.js"
import { type Link, type LinkFilter, LinkRecord, type LinkSearch } from "../../domain/Link.js"
import { LinkRepo, type LinkSnapshot } from "../../domain/ports/LinkRepo.js"
import { Outbox, type OutboxEvent } from "../../domain/ports/Outbox.js"
import { UsageRepo } from "../../domain/ports/UsageRepo.js"
import { UtmPresetRepo } from "../../domain/ports/UtmPresetRepo.js"
import type { UtmPresetRecord } from "../../domain/UtmPreset.js"

/** An event as the in-memory outbox keeps it: the envelope with its topic and message key. */
export type StoredEvent = OutboxEvent & { readonly topic: string; readonly key: string }

/** The state of the in-memory ports: what a test inspects after calling a service. */
export interface MemoryState {
  links: Map<string, LinkRecord>
  presets: Map<string, UtmPresetRecord>
  events: Array<StoredEvent>
  /** `${accountId}/${period}/${metric}` -> value */
  usage: Map<string, number>
  seq: bigint
  /** Repository calls by name (to check that a malformed id never reaches the repository). */
  calls: Array<string>
}

/** A principal of the given account (plan free, metered unless told). */
export const principal = (accountId: string, options: Partial<Principal> = {}): Principal => ({
  keyId: ApiKeyId.make(`key_${accountId.replace(/[^0-9A-Za-z]/g, "")}`),
  accountId: AccountId.make(accountId),
  plan: "free",
  scopes: new Set(["links:read", "links:write"]),
  unmetered: false,
  ...options
})

const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

const makeLinkRepo = (state: MemoryState) => {
  const nextSeq = () => ++state.seq
  const change = (id: string, f: (row: LinkRecord) => Partial<Link>) =>
    Effect.map(now, (at) => {
      const row = state.links.get(id)!
      const changed = new LinkRecord({ ...row, ...f(row), updatedAt: at })
      state.links.set(id, changed)
      return changed
    })
  const matches = (accountId: string, s: LinkFilter & { readonly afterSeq?: bigint | undefined }) => (l: LinkRecord) =>
    l.accountId === accountId &&
    (s.afterSeq === undefined || l.seq < s.afterSeq) &&
    (s.q === undefined ||
      l.slug.toLowerCase().includes(s.q.toLowerCase()) ||
      l.destinationUrl.toLowerCase().includes(s.q.toLowerCase())) &&
    (s.status === undefined || l.status === s.status) &&
    (s.createdAfter === undefined || l.createdAt > s.createdAfter) &&
    (s.createdBefore === undefined || l.createdAt < s.createdBefore)
  const search = (accountId: string, s: LinkSearch) =>
    Effect.sync(() =>
      [...state.links.values()]
        .filter(matches(accountId, s))
        .sort((a, b) => (a.seq > b.seq ? -1 : 1))
        .slice(0, s.limit)
    )
  const find = (accountId: string, id: string) =>
    Effect.sync(() => {
      state.calls.push("links.find")
      return Option.filter(Option.fromNullable(state.links.get(id)), (l) => l.accountId === accountId)
    })
  return LinkRepo.of({
    insert: (link) =>
      Effect.map(now, (at) => {
        state.calls.push("links.insert")
        if ([...state.links.values()].some((l) => l.slug === link.slug)) return Option.none()
        const row = new LinkRecord({ ...link, seq: nextSeq(), createdAt: at, updatedAt: at })
        state.links.set(row.id, row)
        return Option.some(row)
      }),
    find,
    findForUpdate: find,
    setDestination: (id, destinationUrl) => change(id, () => ({ destinationUrl })),
    setOptions: (id, options) =>
      change(id, () => ({
        ...(options.utm === undefined ? {} : { utm: options.utm }),
        ...(options.expiresAt === undefined ? {} : { expiresAt: options.expiresAt })
      })),
    disable: (id) => change(id, () => ({ status: "disabled" })),
    search,
    streamAll: (accountId, filter = {}) =>
      Stream.flatMap(Stream.fromEffect(search(accountId, { ...filter, limit: Number.MAX_SAFE_INTEGER })), (rows) =>
        Stream.fromChunk(Chunk.fromIterable(rows))
      ),
    forEachSnapshot: <E, R>(batchSize: number, f: (batch: ReadonlyArray<LinkSnapshot>) => Effect.Effect<void, E, R>) =>
      Effect.gen(function* () {
        const all = [...state.links.values()].map((l) => ({
          id: l.id,
          accountId: l.accountId,
          slug: l.slug,
          destinationUrl: l.destinationUrl,
          active: l.status === "active",
          utm: l.utm,
          expiresAt: l.expiresAt === null ? null : l.expiresAt.getTime(),
          updatedAt: l.updatedAt.getTime()
        }))
        for (let i = 0; i < all.length; i += batchSize) yield* f(all.slice(i, i + batchSize))
        return all.length
      }),
    estimatedCount: Effect.sync(() => state.links.size)
  })
}

const makeOutbox = (state: MemoryState) => {
  const append = <T extends string, D>(topic: string, key: string, type: T, accountId: string, data: D) =>
    Effect.map(now, (at) => {
      const event = {
        id: `evt_${state.events.length + 1}`,
        type,
        version: 1 as const,
        occurred_at: at.toISOString(),
        account_id: accountId,
        data
      }
      state.events.push({ ...event, topic, key })
      return event
    })
  return Outbox.of({
    append,
    appendEvent: (schema, topic, key, type, accountId, data) =>
      Effect.flatMap(Effect.orDie(Schema.encode(schema)(data)), (encoded) =>
        append(topic, key, type, accountId, encoded)
      )
  })
}

/** A savepoint of the in-memory state: `counted` rolls back to it as PostgreSQL would. */
const savepoint = (state: MemoryState) => {
  const links = new Map(state.links)
  const presets = new Map(state.presets)
  const events = state.events.length
  const seq = state.seq
  return () => {
    state.links = links
    state.presets = presets
    state.events.length = events
    state.seq = seq
  }
}

const makeUsageRepo = (state: MemoryState) => {
  const current = (accountId: string, period: string, metric: string) =>
    state.usage.get(`${accountId}/${period}/${metric}`) ?? 0
  const reserve = (accountId: string, period: string, metric: string, limit: number | null) =>
    Effect.sync(() => {
      const value = current(accountId, period, metric)
      if (limit !== null && value >= limit) return Option.none<number>()
      state.usage.set(`${accountId}/${period}/${metric}`, value + 1)
      return Option.some(value + 1)
    })
  return UsageRepo.of({
    reserve,
    current: (accountId, period, metric) => Effect.sync(() => current(accountId, period, metric)),
    counted: (accountId, period, metric, limit, use) =>
      Effect.suspend(() => {
        const rollback = savepoint(state)
        return use.pipe(
          Effect.tapError(() => Effect.sync(rollback)),
          Effect.flatMap((a) =>
            Effect.map(reserve(accountId, period, metric, limit), (value) => {
              if (Option.isSome(value)) return Either.right(a)
              rollback()
              return Either.left(current(accountId, period, metric))
            })
          )
        )
      })
  })
}

const makeUtmPresetRepo = (state: MemoryState) => {
  const find = (accountId: string, id: string) =>
    Effect.sync(() => {
      state.calls.push("presets.find")
      return Option.filter(Option.fromNullable(state.presets.get(id)), (p) => p.accountId === accountId)
    })
  const nameInUse = (accountId: string, name: string, except?: string) =>
    [...state.presets.values()].some((p) => p.accountId === accountId && p.name === name && p.id !== except)
  return UtmPresetRepo.of({
    insert: (preset) =>
      Effect.map(now, (at) => {
        if (nameInUse(preset.accountId, preset.name)) return Option.none()
        const row: UtmPresetRecord = { ...preset, seq: ++state.seq, createdAt: at, updatedAt: at }
        state.presets.set(row.id, row)
        return Option.some(row)
      }),
    find,
    findForUpdate: find,
    update: (id, changes) =>
      Effect.map(now, (at) => {
        const row = state.presets.get(id)!
        if (changes.name !== undefined && nameInUse(row.accountId, changes.name, id)) return Option.none()
        const changed = {
          ...row,
          ...(changes.name === undefined ? {} : { name: changes.name }),
          ...(changes.utm === undefined ? {} : { utm: changes.utm }),
          updatedAt: at
        }
        state.presets.set(id, changed)
        return Option.some(changed)
      }),
    remove: (accountId, id) =>
      Effect.sync(() => {
        state.calls.push("presets.remove")
        const row = Option.filter(Option.fromNullable(state.presets.get(id)), (p) => p.accountId === accountId)
        if (Option.isSome(row)) state.presets.delete(id)
        return row
      }),
    list: (accountId, { afterSeq, limit }) =>
      Effect.sync(() =>
        [...state.presets.values()]
          .filter((p) => p.accountId === accountId && (afterSeq === undefined || p.seq < afterSeq))
          .sort((a, b) => (a.seq > b.seq ? -1 : 1))
          .slice(0, limit)
      )
  })
}

/**
 * LinkRepo, Outbox, UsageRepo and UtmPresetRepo over one in-memory state, with the
 * PostgreSQL adapters' contracts (slugs unique, preset names unique per account, `counted`
 * undoing the use when the quota refuses it). Fresh for each test.
 */
export const memoryPorts = () => {
  const state: MemoryState = {
    links: new Map(),
    presets: new Map(),
    events: [],
    usage: new Map(),
    seq: 0n,
    calls: []
  }
  const layer = Layer.mergeAll(
    Layer.succeed(LinkRepo, makeLinkRepo(state)),
    Layer.succeed(Outbox, makeOutbox(state)),
    Layer.succeed(UsageRepo, makeUsageRepo(state)),
    Layer.succeed(UtmPresetRepo, makeUtmPresetRepo(state))
  )
  return { state, layer }
}
