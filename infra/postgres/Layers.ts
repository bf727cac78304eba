import { Layer } from "effect"
import { AbuseReportRepoLive } from "./AbuseReports.js"
import { DatabaseHealthLive } from "./Health.js"
import { ImageJobRepoLive } from "./ImageJobs.js"
import { ImageRepoLive } from "./Images.js"
import { ImageTracesLive } from "./ImageTraces.js"
import { NotificationsLive } from "./Listen.js"
import { RatingReviewRepoLive } from "./RatingReviews.js"
import { StorageRepoLive } from "./Storage.js"
import { TransactionsLive } from "./Transactions.js"

/**
 * Every repository of hosted images: ImageRepo, StorageRepo, ImageJobRepo, RatingReviewRepo
 * and AbuseReportRepo, and the images' traces (ImageTraces). Needs the PgClient and the Outbox
 * (image events go to it).
 */
export const ImageReposLive = Layer.mergeAll(
  ImageJobRepoLive,
  RatingReviewRepoLive,
  AbuseReportRepoLive,
  ImageTracesLive
).pipe(Layer.provideMerge(ImageRepoLive), Layer.provideMerge(StorageRepoLive))

/** Transactions, the readiness probe and LISTEN on the PgClient. */
export const DatabasePortsLive = Layer.mergeAll(TransactionsLive, DatabaseHealthLive, NotificationsLive)
