import { Layer } from "effect"
import { DatabaseHealthLive } from "../../infra/postgres/Health.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { SnapshotReposLive } from "../../infra/postgres/Snapshots.js"
import { SnapshotHostLive } from "./SnapshotHost.js"

/**
 * The snapshot host's composition root: published snapshots on their own origin, with the
 * snapshot repositories and the readiness probe. Needs the engines: PostgreSQL, the blob
 * store and AppConfig.
 */
export const SnapshotsAppLive = SnapshotHostLive.pipe(
  Layer.provide(Layer.merge(SnapshotReposLive, DatabaseHealthLive)),
  Layer.provide(OutboxLive)
)
