import { Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { DatabaseLive } from "../../infra/Database.js"
import { runMain } from "../../infra/Main.js"
import { ApiServerLive } from "./Server.js"

runMain(ApiServerLive.pipe(Layer.provide(DatabaseLive), Layer.provide(AppConfig.layer)))
