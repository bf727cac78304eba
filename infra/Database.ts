import { NodeContext } from "@effect/platform-node"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "./AppConfig.js"
import { acquireEmbeddedPostgres } from "./EmbeddedPostgres.js"
import { migrations } from "./migrations/index.js"

/**
 * The PostgreSQL client: `DATABASE_URL` when set, otherwise the embedded server under
 * `DATA_DIR` (started here and stopped when the layer is released, after the pool closes).
 */
export const PgLive = Layer.unwrapScoped(
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (Option.isSome(config.databaseUrl)) {
      return PgClient.layer({ url: config.databaseUrl.value, maxConnections: 20, applicationName: "shortlinks" })
    }
    const embedded = yield* acquireEmbeddedPostgres(config.dataDir)
    yield* Effect.logInfo(
      `embedded PostgreSQL ${embedded.owned ? "started" : "already running"} on 127.0.0.1:${embedded.port}`
    )
    return PgClient.layer({
      host: embedded.host,
      port: embedded.port,
      username: embedded.username,
      password: Redacted.make(embedded.password),
      database: embedded.database,
      maxConnections: 20,
      applicationName: "shortlinks"
    })
  })
)

export const MigrationsLive = PgMigrator.layer({ loader: migrations }).pipe(Layer.provide(NodeContext.layer))

/** Client plus schema: every app that touches the database starts from this. */
export const DatabaseLive = MigrationsLive.pipe(Layer.provideMerge(PgLive))
