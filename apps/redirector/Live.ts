import { Layer } from "effect"
import { DomainRepoLive } from "../../infra/postgres/Domains.js"
import { LinkRepoLive } from "../../infra/postgres/Links.js"
import { VisitorSecretRepoLive } from "../../infra/postgres/VisitorSecrets.js"
import { VerifiedHostsLive } from "./HostTable.js"
import { RedirectorLive } from "./Redirector.js"

/**
 * The redirector's composition root: the short host with the verified custom hosts it also
 * serves, and the repositories it reads (the slug and host tables' first loads, the visitor secrets). Needs the engines: PostgreSQL, the event log it
 * follows and publishes clicks to, and AppConfig.
 */
export const RedirectorAppLive = RedirectorLive.pipe(
  Layer.provide(VerifiedHostsLive.pipe(Layer.provide(DomainRepoLive))),
  Layer.provide(Layer.merge(LinkRepoLive, VisitorSecretRepoLive))
)
