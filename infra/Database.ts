import { NodeContext } from "@effect/platform-node"
import { SqlError } from "@effect/sql"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Layer, Metric, Option, Redacted } from "effect"
import pg from "pg"
import { AppConfig, listenPorts } from "./AppConfig.js"
import { acquireEmbeddedPostgres } from "./EmbeddedPostgres.js"
import { databasePool } from "./Metrics.js"
import { migrations } from "./migrations/index.js"
import { gaugeSource } from "./Prometheus.js"

const APPLICATION_NAME = "shortlinks"

/**
 * The pg pool behind the PgClient, made here (as PgClient.layer would) so that its sizes reach
 * `/metrics`: connections in use and idle, and queries waiting for one. Checked with one
 * query, closed when the scope closes.
 */
const acquirePool = (config: pg.PoolConfig) =>
  Effect.gen(function* () {
    const pool = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const pool = new pg.Pool({ ...config, max: 20, application_name: APPLICATION_NAME })
          pool.on("error", () => {}) // an idle client's error: the pool drops it and the next query reconnects
          await pool.query("SELECT 1").catch(async (error) => {
            await pool.end().catch(() => {})
            throw error
          })
          return pool
        },
        catch: (cause) => new SqlError.SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(
        Effect.timeoutFail({
          duration: "5 seconds",
          onTimeout: () =>
            new SqlError.SqlError({
              cause: new Error("Connection timed out"),
              message: "PgClient: Connection timed out"
            })
        })
      ),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    )
    yield* gaugeSource(Metric.tagged(databasePool, "state", "in_use"), () => pool.totalCount - pool.idleCount)
    yield* gaugeSource(Metric.tagged(databasePool, "state", "idle"), () => pool.idleCount)
    yield* gaugeSource(Metric.tagged(databasePool, "state", "waiting"), () => pool.waitingCount)
    return pool
  })

/**
 * The PostgreSQL client: `DATABASE_URL` when set, otherwise the embedded server under
 * `DATA_DIR` (started here and stopped when the layer is released, after the pool closes).
 */
export const PgLive = Layer.unwrapScoped(
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (Option.isSome(config.databaseUrl)) {
      return PgClient.layerFromPool({
        acquire: acquirePool({ connectionString: Redacted.value(config.databaseUrl.value) }),
        applicationName: APPLICATION_NAME
      })
    }
    const embedded = yield* acquireEmbeddedPostgres(config.dataDir, listenPorts(config))
    yield* Effect.logInfo(
      `embedded PostgreSQL ${embedded.owned ? "started" : "already running"} on 127.0.0.1:${embedded.port}`
    )
    return PgClient.layerFromPool({
      acquire: acquirePool({
        host: embedded.host,
        port: embedded.port,
        user: embedded.username,
        password: embedded.password,
        database: embedded.database
      }),
      applicationName: APPLICATION_NAME
    })
  })
)

export const MigrationsLive = PgMigrator.layer({ loader: migrations }).pipe(Layer.provide(NodeContext.layer))

/** Client plus schema: every app that touches the database starts from this. */
export const DatabaseLive = MigrationsLive.pipe(Layer.provideMerge(PgLive))
