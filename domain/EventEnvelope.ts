import { Schema } from "effect"

/**
 * Every event on every topic has this envelope. `data` is the entity's state after the
 * change, so a consumer can build its projection from any single event.
 */
export const envelope = <const T extends string, D extends Schema.Schema.Any, const V extends number = 1>(
  type: T,
  data: D,
  version: V = 1 as V
) =>
  Schema.Struct({
    id: Schema.String.annotations({ description: "Event id, unique; consumers deduplicate on it." }),
    type: Schema.Literal(type),
    version: Schema.Literal(version),
    occurred_at: Schema.String.annotations({ description: "ISO 8601 instant of the change." }),
    account_id: Schema.String,
    data
  })
