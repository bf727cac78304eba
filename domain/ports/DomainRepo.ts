import { Context, type Effect, type Option } from "effect"
import type { AccountId } from "../Account.js"
import type { Domain, DomainChange, DomainId, DomainRecord, NewDomain } from "../Domain.js"
import type { DatabaseError } from "./Database.js"

/** A verified host as the redirector serves it. */
export interface VerifiedHost {
  readonly id: DomainId
  readonly accountId: AccountId
  readonly hostname: string
  readonly updatedAt: Date
}

export interface DomainRepoShape {
  /** Inserts unless the hostname is registered (and not disabled) by any account; None then. */
  readonly insert: (domain: NewDomain) => Effect.Effect<Option.Option<Domain>>
  /** The account's domain. */
  readonly find: (accountId: AccountId, id: DomainId) => Effect.Effect<Option.Option<Domain>>
  /** The same, locked for the rest of the transaction. */
  readonly findForUpdate: (accountId: AccountId, id: DomainId) => Effect.Effect<Option.Option<Domain>>
  /** Applies a check's or a disable's outcome. */
  readonly update: (id: DomainId, change: DomainChange) => Effect.Effect<Domain>
  /** The account's domains, newest first, keyset-paged on seq. */
  readonly list: (
    accountId: AccountId,
    options: { readonly afterSeq?: bigint | undefined; readonly limit: number }
  ) => Effect.Effect<ReadonlyArray<DomainRecord>>
  /** The account's domains that are not disabled (the plan's custom_domains counts them). */
  readonly countActive: (accountId: AccountId) => Effect.Effect<number>
  /** Registrations of the account since the instant (the plan's registration rate). */
  readonly countRegisteredSince: (accountId: AccountId, since: Date) => Effect.Effect<number>
  /** Serializes the account's registrations until the transaction ends (so counts hold). */
  readonly lockAccount: (accountId: AccountId) => Effect.Effect<void>
  /** The account's verified host names, oldest verification first (a link's short_urls). */
  readonly verifiedHostnames: (accountId: AccountId) => Effect.Effect<ReadonlyArray<string>>
  /** The verified host of the account with this hostname, if any (QR `domain`). */
  readonly findVerified: (accountId: AccountId, hostname: string) => Effect.Effect<Option.Option<Domain>>
  /** Every verified host: the redirector's first load. */
  readonly allVerified: Effect.Effect<ReadonlyArray<VerifiedHost>, DatabaseError>
  /**
   * Runs `sweep` if no other process is sweeping (a transaction-scoped advisory lock), in one
   * transaction; None when another holds the lock.
   */
  readonly whileSweeping: <A, E, R>(
    sweep: Effect.Effect<A, E, R>
  ) => Effect.Effect<Option.Option<A>, E | DatabaseError, R>
  /** Verified domains last checked before `checkedBefore`, oldest check first, locked, at most `limit`. */
  readonly dueForRecheck: (checkedBefore: Date, limit: number) => Effect.Effect<ReadonlyArray<Domain>>
}

/** Custom domains, as the model (domain/Domain.ts). Every call runs in the caller's transaction. */
export class DomainRepo extends Context.Tag("DomainRepo")<DomainRepo, DomainRepoShape>() {}
