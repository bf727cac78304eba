import { Context, type Effect, type Option } from "effect"
import type { Account, AccountNotFound, ApiKeyId, IssuedKey, KeyNotFound, Principal, RevokedKey } from "../Account.js"
import type { Scope } from "../Scope.js"
import type { DatabaseError } from "./Database.js"

export interface AccountRepoShape {
  readonly createAccount: (input: {
    readonly name: string
    readonly plan: string
  }) => Effect.Effect<Account, DatabaseError>
  /**
   * Moves an account to another plan (the caller checks the name against the plan table).
   * The new plan applies to the account's keys from the next request, in every process.
   */
  readonly setPlan: (input: {
    readonly accountId: string
    readonly plan: string
  }) => Effect.Effect<{ readonly id: string; readonly plan: string }, AccountNotFound | DatabaseError>
  readonly createKey: (input: {
    readonly accountId: string
    readonly scopes: ReadonlyArray<Scope>
    readonly unmetered: boolean
  }) => Effect.Effect<IssuedKey, AccountNotFound | DatabaseError>
  /** Revokes a key at once, in every process; revoking it again keeps the first time. */
  readonly revokeKey: (id: ApiKeyId) => Effect.Effect<RevokedKey, KeyNotFound | DatabaseError>
  /** The principal of a valid (well-formed, known, unrevoked) key; None for any other token. */
  readonly authenticate: (token: string) => Effect.Effect<Option.Option<Principal>>
}

/** Accounts and their API keys. */
export class AccountRepo extends Context.Tag("AccountRepo")<AccountRepo, AccountRepoShape>() {}
