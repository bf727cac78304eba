import type { PgClient } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { EventLog, type EventLogError } from "../../domain/EventLog.js"
import { AppConfig } from "../AppConfig.js"
import { EmbeddedEventLogLive } from "./Embedded.js"
import { KafkaEventLogLive } from "./Kafka.js"

/** Kafka when KAFKA_BROKERS is set, otherwise the embedded log in PostgreSQL. */
export const EventLogLive: Layer.Layer<EventLog, EventLogError, AppConfig | PgClient.PgClient> = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => {
    const layer = config.kafkaBrokers.length > 0 ? KafkaEventLogLive(config.kafkaBrokers) : EmbeddedEventLogLive
    const announce = Layer.effectDiscard(
      Effect.flatMap(EventLog, (log) =>
        Effect.logInfo(
          log.kind === "kafka"
            ? `event log: Kafka at ${config.kafkaBrokers.join(",")}`
            : "event log: embedded in PostgreSQL (no KAFKA_BROKERS)"
        )
      )
    )
    return Layer.provideMerge(announce, layer)
  })
)
