import { Migrator } from "@effect/sql"
import m0001 from "./0001_foundation.js"
import m0002 from "./0002_utm_presets.js"
import m0003 from "./0003_usage.js"
import m0004 from "./0004_event_log.js"
import m0005 from "./0005_visitor_secrets.js"
import m0006 from "./0006_images.js"
import m0007 from "./0007_event_log_storage.js"
import m0008 from "./0008_domains.js"
import m0009 from "./0009_snapshots.js"
import m0010 from "./0010_image_traces.js"

export const migrations = Migrator.fromRecord({
  "0001_foundation": m0001,
  "0002_utm_presets": m0002,
  "0003_usage": m0003,
  "0004_event_log": m0004,
  "0005_visitor_secrets": m0005,
  "0006_images": m0006,
  "0007_event_log_storage": m0007,
  "0008_domains": m0008,
  "0009_snapshots": m0009,
  "0010_image_traces": m0010
})
