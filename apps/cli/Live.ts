import { Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { DatabaseLive } from "../../infra/Database.js"
import { Plans } from "../../infra/Plans.js"
import { AccountRepoLive } from "../../infra/postgres/Accounts.js"
import { ImageReposLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { TransactionsLive } from "../../infra/postgres/Transactions.js"
import { RatingReviews } from "../api/Images/RatingReviews.js"

/**
 * The CLI's composition root: the accounts repository and the rating reviews service over
 * the database (DATABASE_URL, or the embedded PostgreSQL under DATA_DIR, the running one if
 * the service is up). PLANS is read before the database starts: a bad value stops the
 * command at once.
 */
export const CliLive = Layer.mergeAll(AccountRepoLive, RatingReviews.Default).pipe(
  Layer.provide([ImageReposLive, TransactionsLive]),
  Layer.provide(OutboxLive),
  Layer.provideMerge(DatabaseLive),
  Layer.provide(AppConfig.layer),
  Layer.provideMerge(Plans.layer)
)
