import { Data, Schema } from "effect"
import type { Scope } from "./Scope.js"

/**
 * An account id: `acct_` and base62 characters (infra/Ids.ts issues 22 of them), up to 64
 * like a link id, so that ids of an older length still name their account.
 */
export const AccountId = Schema.String.pipe(Schema.pattern(/^acct_[0-9A-Za-z]{1,64}$/), Schema.brand("AccountId"))
export type AccountId = typeof AccountId.Type

/**
 * An API key's id: `key_` and base62 characters (infra/postgres/Accounts.ts issues 22), the
 * public half of the key. Only the secret's hash is stored beside it.
 */
export const ApiKeyId = Schema.String.pipe(Schema.pattern(/^key_[0-9A-Za-z]{1,64}$/), Schema.brand("ApiKeyId"))
export type ApiKeyId = typeof ApiKeyId.Type

/** Whether a text is shaped like a key id (anything else names no key and must not reach SQL). */
export const isApiKeyId = Schema.is(ApiKeyId)

/** Who is calling: resolved from the API key on every request. */
export interface Principal {
  readonly keyId: ApiKeyId
  readonly accountId: AccountId
  readonly plan: string
  readonly scopes: ReadonlySet<string>
  readonly unmetered: boolean
}

export class AccountNotFound extends Data.TaggedError("AccountNotFound")<{ readonly id: string }> {}
export class KeyNotFound extends Data.TaggedError("KeyNotFound")<{ readonly id: string }> {}

/**
 * An API key: sk_<key id: 22 base62>_<secret: 64 hex>. The id part finds the record; only
 * the SHA-256 of the secret is stored.
 */
export const API_KEY_FORMAT = /^sk_([0-9A-Za-z]{22})_([0-9a-f]{64})$/

/** Whether the text carries something shaped like an API key (to refuse keys sent in the wrong place). */
export const looksLikeApiKey = (s: string): boolean => /sk_[0-9A-Za-z]{22}_[0-9a-f]{16,}/.test(s)

export interface Account {
  readonly id: AccountId
  readonly name: string
  readonly plan: string
}

/** A key as issued: `key` is the secret, shown once. */
export interface IssuedKey {
  readonly id: ApiKeyId
  readonly key: string
  readonly scopes: ReadonlyArray<Scope>
  readonly unmetered: boolean
}

export interface RevokedKey {
  readonly id: ApiKeyId
  /** ISO 8601: when it was first revoked. */
  readonly revoked_at: string
}
