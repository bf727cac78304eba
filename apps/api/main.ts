import { Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { CodecLive } from "../../infra/codec/ImageCodec.js"
import { DatabaseLive } from "../../infra/Database.js"
import { DnsResolverLive } from "../../infra/dns/DnsResolver.js"
import { SafeFetcherLive } from "../../infra/fetcher/SafeFetcher.js"
import { runMain } from "../../infra/Main.js"
import { Plans } from "../../infra/Plans.js"
import { TracingLive } from "../../infra/Tracing.js"
import { ApiServerLive } from "./Live.js"

// Settings first (AppConfig, then PLANS), so a bad one stops start-up before the database starts.
// The codec probes uploads (headers only), whose private sources go to the blob store for the
// conversion worker; URL imports go through the SSRF-safe fetcher.
runMain(
  ApiServerLive.pipe(
    Layer.provide(AnalyticsLive),
    Layer.provide(CodecLive),
    Layer.provide(SafeFetcherLive),
    Layer.provide(DnsResolverLive),
    Layer.provide(BlobStoreLive),
    Layer.provide(DatabaseLive),
    Layer.provide(Plans.layer),
    Layer.provide(AppConfig.layer),
    // Outermost: the tracer is set before any app starts, and flushes after the last one stopped.
    Layer.provide(TracingLive("shortlinks-api"))
  )
)
