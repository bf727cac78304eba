import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Schema } from "effect"
import { Outbox, type OutboxEvent } from "../../domain/ports/Outbox.js"
import { newId } from "../Ids.js"

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
  const appendEvent = <T extends string, A, I>(
    schema: Schema.Schema<A, I>,
    topic: string,
    key: string,
    type: T,
    accountId: string,
    data: A
  ): Effect.Effect<OutboxEvent<T, I>, never> =>
    Effect.flatMap(Effect.orDie(Schema.encode(schema)(data)), (encoded) => append(topic, key, type, accountId, encoded))
  return Outbox.of({ append, appendEvent })
})

/** The outbox table; OutboxRelay.ts publishes it. */
export const OutboxLive: Layer.Layer<Outbox, never, PgClient.PgClient> = Layer.effect(Outbox, make)
