import { Layer } from "effect"
import { DatabaseHealthLive } from "../../infra/postgres/Health.js"
import { ImageReposLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { MediaLive } from "./Media.js"

/**
 * The image host's composition root: delivery, share pages and abuse reports with the image
 * repositories (whose events go to the outbox) and the readiness probe. Needs the engines:
 * PostgreSQL, the blob store and AppConfig.
 */
export const MediaAppLive = MediaLive.pipe(
  Layer.provide(Layer.merge(ImageReposLive, DatabaseHealthLive)),
  Layer.provide(OutboxLive)
)
