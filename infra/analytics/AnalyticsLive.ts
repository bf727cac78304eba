import * as path from "node:path"
import { Effect, Layer, Option, Redacted } from "effect"
import { Analytics } from "../../domain/Analytics.js"
import { AppConfig } from "../AppConfig.js"
import { acquireChdbEngine } from "./Chdb.js"
import { acquireServerEngine, parseServerUrl } from "./ClickHouseServer.js"
import { makeStore } from "./Store.js"

/**
 * The analytics store: the ClickHouse server at `CLICKHOUSE_URL` when set, otherwise chDB
 * in-process under `DATA_DIR/clickhouse` (one process at a time: the engine locks it).
 * Creates its tables on start.
 */
export const AnalyticsLive = Layer.scoped(
  Analytics,
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (Option.isSome(config.clickhouseUrl)) {
      const target = parseServerUrl(Redacted.value(config.clickhouseUrl.value))
      const store = yield* makeStore(yield* acquireServerEngine(target), target.database)
      yield* Effect.logInfo(`analytics: ClickHouse server at ${target.origin}, database ${target.database}`)
      return store
    }
    const dir = path.resolve(config.dataDir, "clickhouse")
    const store = yield* makeStore(yield* acquireChdbEngine(dir), "analytics")
    yield* Effect.logInfo(`analytics: chDB in ${dir}`)
    return store
  })
)
