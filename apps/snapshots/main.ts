import { Config, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { DatabaseLive } from "../../infra/Database.js"
import { httpEngineConfig } from "../../infra/http/HttpServer.js"
import { runMain } from "../../infra/Main.js"
import { SnapshotsAppLive } from "./Live.js"

const Settings = Layer.merge(AppConfig.layer, Layer.effectDiscard(Config.all([httpEngineConfig])))

// The snapshot host on its own (`npm run start:snapshots`): as many copies as needed.
runMain(SnapshotsAppLive.pipe(Layer.provide(BlobStoreLive), Layer.provideMerge(DatabaseLive), Layer.provide(Settings)))
