import { Layer } from "effect"
import { LinkRepoLive } from "../../infra/postgres/Links.js"
import { VisitorSecretRepoLive } from "../../infra/postgres/VisitorSecrets.js"
import { RedirectorLive } from "./Redirector.js"

/**
 * The redirector's composition root: the short host with the repositories it reads (the slug
 * table's first load, the visitor secrets). Needs the engines: PostgreSQL, the event log it
 * follows and publishes clicks to, and AppConfig.
 */
export const RedirectorAppLive = RedirectorLive.pipe(Layer.provide(Layer.merge(LinkRepoLive, VisitorSecretRepoLive)))
