import { Config, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { DatabaseLive } from "../../infra/Database.js"
import { httpEngineConfig } from "../../infra/http/HttpServer.js"
import { runMain } from "../../infra/Main.js"
import { MediaAppLive } from "./Live.js"
import { mediaCacheBytesConfig, mediaReportsPerMinuteConfig } from "./MediaConfig.js"

// Every setting is read first (AppConfig, HTTP_ENGINE, MEDIA_*), so a bad one stops start-up
// before the database starts.
const Settings = Layer.merge(
  AppConfig.layer,
  Layer.effectDiscard(Config.all([httpEngineConfig, mediaCacheBytesConfig, mediaReportsPerMinuteConfig]))
)

// The image host on its own (`npm run start:media`): as many copies as needed, all reading
// the same PostgreSQL and blob store.
runMain(MediaAppLive.pipe(Layer.provide(BlobStoreLive), Layer.provideMerge(DatabaseLive), Layer.provide(Settings)))
