import { Context, type Effect, type Schema } from "effect"

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
  /**
   * Appends the event (a new id, occurred now) for `key` on `topic`, in the caller's transaction,
   * with `data` as given (no schema: tests of the relay). Domain events use appendEvent.
   */
  readonly append: <T extends string, D>(
    topic: string,
    key: string,
    type: T,
    accountId: string,
    data: D
  ) => Effect.Effect<OutboxEvent<T, D>>
  /**
   * The same, with `data` encoded through the event's data schema: what is stored is what the
   * schema says. Data the schema refuses is a defect (the caller built an invalid state).
   */
  readonly appendEvent: <T extends string, A, I>(
    schema: Schema.Schema<A, I>,
    topic: string,
    key: string,
    type: T,
    accountId: string,
    data: A
  ) => Effect.Effect<OutboxEvent<T, I>>
}

/**
 * Events appended in the same transaction as the change they describe; a relay publishes
 * them to the event log in order.
 */
export class Outbox extends Context.Tag("Outbox")<Outbox, OutboxShape>() {}
