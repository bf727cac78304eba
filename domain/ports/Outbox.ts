import { Context, type Effect } from "effect"

/** The envelope of every event (docs/events.md). */
export interface OutboxEvent<T extends string = string, D = unknown> {
  readonly id: string
  readonly type: T
  readonly version: 1
  readonly occurred_at: string
  readonly account_id: string
  readonly data: D
}

export interface OutboxShape {
  /** Appends the event (a new id, occurred now) for `key` on `topic`, in the caller's transaction. */
  readonly append: <T extends string, D>(
    topic: string,
    key: string,
    type: T,
    accountId: string,
    data: D
  ) => Effect.Effect<OutboxEvent<T, D>>
}

/**
 * Events appended in the same transaction as the change they describe; a relay publishes
 * them to the event log in order.
 */
export class Outbox extends Context.Tag("Outbox")<Outbox, OutboxShape>() {}
