import { Context, type Effect, type Option, type Stream } from "effect"
import type { AccountId } from "../Account.js"
import type { Link, LinkFilter, LinkId, LinkRecord, LinkSearch, NewLink } from "../Link.js"
import type { DatabaseError } from "./Database.js"

export interface LinkOptionsChange {
  readonly utm?: Link["utm"]
  readonly expiresAt?: Date | null
}

/**
 * A link's redirect state as plain data (times in ms since the epoch, truncated as Date
 * truncates): what the redirector's load reads, a million at a time, without building models.
 */
export interface LinkSnapshot {
  readonly id: string
  readonly accountId: string
  readonly slug: string
  readonly destinationUrl: string
  readonly active: boolean
  readonly utm: Readonly<Record<string, string>> | null
  readonly expiresAt: number | null
  readonly updatedAt: number
}

export interface LinkRepoShape {
  /** Inserts unless the slug is taken; None on a slug conflict. */
  readonly insert: (link: NewLink) => Effect.Effect<Option.Option<Link>>
  /** The account's link. */
  readonly find: (accountId: AccountId, id: LinkId) => Effect.Effect<Option.Option<Link>>
  /** The same, locked for the rest of the transaction. */
  readonly findForUpdate: (accountId: AccountId, id: LinkId) => Effect.Effect<Option.Option<Link>>
  readonly setDestination: (id: LinkId, destinationUrl: string) => Effect.Effect<Link>
  /** Changes the options given (undefined: left as is). */
  readonly setOptions: (id: LinkId, options: LinkOptionsChange) => Effect.Effect<Link>
  readonly disable: (id: LinkId) => Effect.Effect<Link>
  /** The account's links matching the search, newest first, keyset-paged on seq. */
  readonly search: (accountId: AccountId, search: LinkSearch) => Effect.Effect<ReadonlyArray<LinkRecord>>
  /**
   * Every link of the account that matches the filter, newest first, read in keyset pages
   * so memory stays flat.
   */
  readonly streamAll: (accountId: AccountId, filter?: LinkFilter, pageSize?: number) => Stream.Stream<Link>
  /**
   * Every link of every account, in no particular order, in one streamed read (a binary COPY
   * in PostgreSQL): `f` gets each batch of at most `batchSize` in turn (one snapshot of the table, memory
   * flat). Says how many links there were.
   */
  readonly forEachSnapshot: <E, R>(
    batchSize: number,
    f: (batch: ReadonlyArray<LinkSnapshot>) => Effect.Effect<void, E, R>
  ) => Effect.Effect<number, DatabaseError | E, R>
  /** About how many links there are, from the database's statistics (no scan; 0 when it has none or fails): a hint. */
  readonly estimatedCount: Effect.Effect<number>
}

/** Short links, as the model (domain/Link.ts). Every call runs in the caller's transaction. */
export class LinkRepo extends Context.Tag("LinkRepo")<LinkRepo, LinkRepoShape>() {}
