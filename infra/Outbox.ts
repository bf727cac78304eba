import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { newId } from "./Ids.js"

export interface OutboxEvent<T extends string = string, D = unknown> {
  readonly id: string
  readonly type: T
  readonly version: 1
  readonly occurred_at: string
  readonly account_id: string
  readonly data: D
}

/**
 * Events appended in the same transaction as the change they describe; a relay publishes
 * them to the event log in order.
 */
const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const append = <T extends string, D>(
    topic: string,
    key: string,
    type: T,
    accountId: string,
    data: D
  ): Effect.Effect<OutboxEvent<T, D>, never> => {
    const event: OutboxEvent<T, D> = {
      id: newId("evt"),
      type,
      version: 1,
      occurred_at: new Date().toISOString(),
      account_id: accountId,
      data
    }
    return sql`INSERT INTO outbox (topic, key, event) VALUES (${topic}, ${key}, ${sql.json(event)})`.pipe(
      Effect.as(event),
      Effect.orDie
    )
  }
  return { append } as const
})

export class Outbox extends Context.Tag("Outbox")<Outbox, Effect.Effect.Success<typeof make>>() {
  static readonly layer = Layer.effect(Outbox, make)
}
