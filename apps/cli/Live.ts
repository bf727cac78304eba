import { Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { DatabaseLive } from "../../infra/Database.js"
import { Plans } from "../../infra/Plans.js"
import { AccountRepoLive } from "../../infra/postgres/Accounts.js"
import { DomainRepoLive } from "../../infra/postgres/Domains.js"
import { ImageReposLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { SnapshotReposLive } from "../../infra/postgres/Snapshots.js"
import { TransactionsLive } from "../../infra/postgres/Transactions.js"
import { RatingReviews } from "../api/Images/RatingReviews.js"

/**
 * The CLI's composition root: the accounts, domains and snapshot repositories and the rating
 * reviews service over
 * the database (DATABASE_URL, or the embedded PostgreSQL under DATA_DIR, the running one if
 * the service is up). PLANS is read before the database starts: a bad value stops the
 * command at once.
 */
export const CliLive = Layer.mergeAll(AccountRepoLive, DomainRepoLive, RatingReviews.Default, SnapshotReposLive).pipe(
  Layer.provide(ImageReposLive),
  Layer.provideMerge(TransactionsLive),
  Layer.provide(OutboxLive),
  Layer.provideMerge(DatabaseLive),
  Layer.provide(AppConfig.layer),
  Layer.provideMerge(Plans.layer)
)
