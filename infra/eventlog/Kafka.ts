import { Effect, Layer } from "effect"
import { EventLog, type EventLogError } from "../../domain/EventLog.js"
import { makeKafkaClient } from "./KafkaClient.js"
import { subscribeGroup } from "./KafkaConsumer.js"
import { follow, read } from "./KafkaFollow.js"

/**
 * The event log on Apache Kafka through kafkajs: topics, publishing and offsets in
 * `KafkaClient.ts`, group members in `KafkaConsumer.ts`, followers and reads in
 * `KafkaFollow.ts`.
 */
export const make = (brokers: ReadonlyArray<string>) =>
  Effect.map(makeKafkaClient(brokers), (client) =>
    EventLog.of({
      publish: client.publish,
      subscribe: (options, schema, handler) => subscribeGroup(client, options, schema, handler),
      follow: (options, schema, handler) => follow(client, options, schema, handler),
      read: (options, schema, handler) => read(client, options, schema, handler),
      endOffsets: client.endOffsets,
      kind: "kafka"
    })
  )

/** The Kafka event log on these brokers (host:port). */
export const KafkaEventLogLive = (brokers: ReadonlyArray<string>): Layer.Layer<EventLog, EventLogError> =>
  Layer.scoped(EventLog, make(brokers))
