import { Context, type Effect } from "effect"
import type { DatabaseError } from "./Database.js"

export interface VisitorSecretRepoShape {
  /**
   * The stored secret of a UTC day (`YYYY-MM-DD`): the first caller of a day stores a fresh
   * random one, every caller then reads the stored one.
   */
  readonly secretOf: (day: string) => Effect.Effect<Uint8Array, DatabaseError>
  /** Deletes the secrets of the days before `day` (`YYYY-MM-DD`). */
  readonly deleteBefore: (day: string) => Effect.Effect<void, DatabaseError>
}

/** The daily visitor-hash secrets, shared by every redirector instance. */
export class VisitorSecretRepo extends Context.Tag("VisitorSecretRepo")<VisitorSecretRepo, VisitorSecretRepoShape>() {}
