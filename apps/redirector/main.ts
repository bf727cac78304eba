import { Config, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { DatabaseLive } from "../../infra/Database.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"
import { httpEngineConfig } from "../../infra/http/HttpServer.js"
import { clickSpoolConfig } from "./ClickSpool.js"
import { RedirectorAppLive } from "./Live.js"
import { clickCaptureConfig, reusePortConfig } from "./Redirector.js"
import { redirectorThreadsConfig, runRedirector } from "./Threads.js"

// Every setting is read first (AppConfig, HTTP_ENGINE, CLICK_CAPTURE, ...), so a bad one stops
// start-up before the database starts.
const Settings = Layer.merge(
  AppConfig.layer,
  Layer.effectDiscard(
    Config.all([httpEngineConfig, clickCaptureConfig, clickSpoolConfig, reusePortConfig, redirectorThreadsConfig])
  )
)

// The short host on its own (`npm run start:redirector`): as many copies as needed, each with
// its own slug table, all sharing PostgreSQL and the event log; with REDIRECTOR_THREADS=n, n
// worker threads of this process each run it (Threads.ts).
runRedirector(
  RedirectorAppLive.pipe(Layer.provide(EventLogLive), Layer.provide(DatabaseLive), Layer.provide(Settings)),
  Settings,
  import.meta.url
)
