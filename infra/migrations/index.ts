import { Migrator } from "@effect/sql"
import m0001 from "./0001_foundation.js"

export const migrations = Migrator.fromRecord({
  "0001_foundation": m0001
})
