import { PgClient } from "@effect/sql-pg"
import { Layer, Redacted } from "effect"
import { MigrationsLive } from "../../infra/Database.js"
import { EmbeddedEventLogLive } from "../../infra/eventlog/Embedded.js"
import { KafkaEventLogLive } from "../../infra/eventlog/Kafka.js"

/** PostgreSQL (migrated) on a test database URL, e.g. from createTestDatabase(). */
export const testDatabaseLayer = (databaseUrl: string) =>
  MigrationsLive.pipe(Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 10 })))

/** The embedded event log over a migrated test database; the PgClient comes with it. */
export const embeddedEventLogLayer = (databaseUrl: string) =>
  EmbeddedEventLogLive.pipe(Layer.provideMerge(testDatabaseLayer(databaseUrl)))

/** The Kafka adapter against TEST_KAFKA_BROKERS (undefined when unset: skip the Kafka suites). */
export const testKafkaBrokers = (): ReadonlyArray<string> | undefined => {
  const env = process.env.TEST_KAFKA_BROKERS?.trim()
  if (env === undefined || env === "") return undefined
  return env
    .split(",")
    .map((b) => b.trim())
    .filter((b) => b !== "")
}

/** The Kafka event log on the given brokers (see testKafkaBrokers). */
export const kafkaEventLogLayer = (brokers: ReadonlyArray<string>) => KafkaEventLogLive(brokers)

/** A topic name no other test run uses. */
export const uniqueTopic = (prefix = "test") =>
  `${prefix}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`
