import { Layer } from "effect"
import { ClassifierLive } from "../../infra/classifier/ClassifierLive.js"
import { DnsResolverLive } from "../../infra/dns/DnsResolver.js"
import { DomainRepoLive } from "../../infra/postgres/Domains.js"
import { DatabasePortsLive, ImageReposLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { OutboxRelayLive } from "../../infra/postgres/OutboxRelay.js"
import { SnapshotReposLive } from "../../infra/postgres/Snapshots.js"
import { Domains } from "../api/Domains/Domains.js"
import { ClickProjectorLive } from "./ClickProjector.js"
import { DomainSweepLive } from "./DomainSweep.js"
import { ImageClassifierLive } from "./ImageClassifier.js"
import { ImageConverterLive } from "./ImageConverter.js"
import { SnapshotCaptureLive } from "./SnapshotCapture.js"

/**
 * The consumers' composition root: the outbox relay (one publishes at a time, the others wait
 * on its lock) and the consumer groups, whose copies share the partitions: the click
 * projector, the image converter (jobs under durable leases), the image classifier and the
 * snapshot capture (short leases; fetches through the SafeFetcher); and the custom domains'
 * re-verification sweep (one process at a time, DNS_SERVERS), with the repositories and
 * database ports they use. Needs the engines: PostgreSQL, the event log, the analytics store,
 * the image codec, the blob store, the SafeFetcher, the plans and AppConfig.
 */
export const WorkersAppLive = Layer.mergeAll(
  OutboxRelayLive,
  ClickProjectorLive,
  ImageConverterLive,
  ImageClassifierLive.pipe(Layer.provide(ClassifierLive)),
  DomainSweepLive.pipe(Layer.provide(Domains.Default), Layer.provide(DnsResolverLive)),
  SnapshotCaptureLive.pipe(Layer.provide(SnapshotReposLive))
).pipe(Layer.provide([ImageReposLive, DatabasePortsLive, DomainRepoLive]), Layer.provide(OutboxLive))
