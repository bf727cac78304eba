import { Context, type Effect, type Option, type Stream } from "effect"
import type { LinkFilter, LinkRecord, LinkRow, LinkSearch, LinkSnapshot } from "../Link.js"
import type { DatabaseError } from "./Database.js"

export interface LinkOptionsChange {
  readonly utm?: LinkRow["utm"]
  readonly expiresAt?: Date | null
}

export interface LinkRepoShape {
  /** Inserts unless the slug is taken; None on a slug conflict. */
  readonly insert: (link: Omit<LinkRow, "createdAt" | "updatedAt">) => Effect.Effect<Option.Option<LinkRecord>>
  /** The account's link. */
  readonly find: (accountId: string, id: string) => Effect.Effect<Option.Option<LinkRecord>>
  /** The same, locked for the rest of the transaction. */
  readonly findForUpdate: (accountId: string, id: string) => Effect.Effect<Option.Option<LinkRecord>>
  readonly setDestination: (id: string, destinationUrl: string) => Effect.Effect<LinkRecord>
  /** Changes the options given (undefined: left as is). */
  readonly setOptions: (id: string, options: LinkOptionsChange) => Effect.Effect<LinkRecord>
  readonly disable: (id: string) => Effect.Effect<LinkRecord>
  /** The account's links matching the search, newest first, keyset-paged on seq. */
  readonly search: (accountId: string, search: LinkSearch) => Effect.Effect<ReadonlyArray<LinkRecord>>
  /**
   * Every link of the account that matches the filter, newest first, read in keyset pages
   * so memory stays flat.
   */
  readonly streamAll: (accountId: string, filter?: LinkFilter, pageSize?: number) => Stream.Stream<LinkRecord>
  /** Every link of every account after `afterSeq`, oldest first, at most `limit`. */
  readonly snapshotsAfter: (
    afterSeq: bigint,
    limit: number
  ) => Effect.Effect<ReadonlyArray<LinkSnapshot>, DatabaseError>
}

/** Short links. Every call runs in the caller's transaction. */
export class LinkRepo extends Context.Tag("LinkRepo")<LinkRepo, LinkRepoShape>() {}
