import { Context, type Effect } from "effect"
import type { AbuseReport } from "../Image.js"

export interface AbuseReportRepoShape {
  /** Files a report about an image; returns its id. */
  readonly file: (imageId: string, reason: string) => Effect.Effect<string>
  /** Open reports, oldest first. */
  readonly open: () => Effect.Effect<ReadonlyArray<AbuseReport>>
}

/** Abuse reports filed from share pages. */
export class AbuseReportRepo extends Context.Tag("AbuseReportRepo")<AbuseReportRepo, AbuseReportRepoShape>() {}
