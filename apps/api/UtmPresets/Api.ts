import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { UTM_KEYS, Utm } from "../../../domain/Link.js"
import * as E from "../Errors.js"
import { Authentication } from "../middleware/Authentication.js"
import { IdempotencyKey } from "../middleware/Idempotency.js"
import { JsonBody } from "../middleware/JsonBody.js"
import { RequiredScope } from "../middleware/Scopes.js"
import { Cursor, Envelope, IdPath, Limit, optional, Page } from "../Shared.js"

export const MAX_PRESET_NAME_LENGTH = 100

const PRESET_NAME_DESCRIPTION = `1 to ${MAX_PRESET_NAME_LENGTH} characters as sent, at least one of them not whitespace. Leading and trailing whitespace is removed before the name is stored; names are unique within the account after that trimming.`

/**
 * A preset name as sent: 1 to 100 characters with at least one that is not whitespace.
 * Leading and trailing whitespace is then removed, so " Newsletter " and "Newsletter" are
 * the same name (and taken once per account).
 */
export const UtmPresetName = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(MAX_PRESET_NAME_LENGTH, { message: () => `must be at most ${MAX_PRESET_NAME_LENGTH} characters` }),
  Schema.filter((s) => s.trim() !== "" || "must contain a character that is not whitespace"),
  Schema.compose(Schema.Trim)
).annotations({
  identifier: "UtmPresetName",
  description: PRESET_NAME_DESCRIPTION,
  jsonSchema: {
    type: "string",
    minLength: 1,
    maxLength: MAX_PRESET_NAME_LENGTH,
    pattern: "\\S",
    description: PRESET_NAME_DESCRIPTION
  }
})

/** The UTM parameters of a preset: at least one of the five, each 1 to 200 characters. */
export const UtmPresetParameters = Utm.pipe(
  Schema.filter(
    (utm) => UTM_KEYS.some((k) => utm[k] !== undefined) || `must set at least one of ${UTM_KEYS.join(", ")}`
  )
).annotations({
  identifier: "UtmPresetParameters",
  description: `At least one of ${UTM_KEYS.join(", ")}; each a string of 1 to 200 characters. No other properties.`,
  jsonSchema: { minProperties: 1 }
})

export const UtmPreset = Schema.Struct({
  id: Schema.String.annotations({ description: "UTM preset identifier; begins with utmp_." }),
  name: Schema.String,
  utm: UtmPresetParameters,
  created_at: Schema.String.annotations({ jsonSchema: { type: "string", format: "date-time" } }),
  updated_at: Schema.String.annotations({ jsonSchema: { type: "string", format: "date-time" } })
}).annotations({ identifier: "UtmPreset" })
export type UtmPreset = typeof UtmPreset.Type

const strict = { onExcessProperty: "error", errors: "all" } as const

export const CreateUtmPreset = Schema.Struct({
  name: UtmPresetName,
  utm: UtmPresetParameters
}).annotations({ identifier: "CreateUtmPreset", parseOptions: strict })

export const UpdateUtmPreset = Schema.Struct({
  name: Schema.optionalWith(UtmPresetName, { exact: true }),
  utm: Schema.optionalWith(UtmPresetParameters, { exact: true })
})
  .pipe(Schema.filter((body) => body.name !== undefined || body.utm !== undefined || "must set name, utm or both"))
  .annotations({
    identifier: "UpdateUtmPreset",
    description: "Sets name, utm or both; utm replaces the preset's UTM parameters as a whole.",
    jsonSchema: { minProperties: 1 },
    parseOptions: strict
  })

export const ListUtmPresetsParams = Schema.Struct({
  cursor: optional(Cursor),
  limit: optional(Limit)
})

const scope = RequiredScope

export class UtmPresetsApi extends HttpApiGroup.make("utmPresets")
  .add(
    HttpApiEndpoint.post("create", "/utm-presets")
      .setPayload(CreateUtmPreset)
      .addSuccess(Envelope(UtmPreset), { status: 201 })
      .addError(E.UtmPresetNameTaken)
      .annotate(scope, "links:write")
      .annotate(OpenApi.Summary, "Create a UTM preset")
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.get("list", "/utm-presets")
      .setUrlParams(ListUtmPresetsParams)
      .addSuccess(Page(UtmPreset))
      .addError(E.InvalidRequest)
      .annotate(scope, "links:read")
      .annotate(OpenApi.Summary, "List UTM presets, newest first")
  )
  .add(
    HttpApiEndpoint.get("get", "/utm-presets/:id")
      .setPath(IdPath)
      .addSuccess(Envelope(UtmPreset))
      .addError(E.NotFound)
      .annotate(scope, "links:read")
      .annotate(OpenApi.Summary, "Read a UTM preset")
  )
  .add(
    HttpApiEndpoint.patch("update", "/utm-presets/:id")
      .setPath(IdPath)
      .setPayload(UpdateUtmPreset)
      .addSuccess(Envelope(UtmPreset))
      .addError(E.NotFound)
      .addError(E.UtmPresetNameTaken)
      .annotate(scope, "links:write")
      .annotate(OpenApi.Summary, "Rename a UTM preset or replace its UTM parameters")
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.del("delete", "/utm-presets/:id")
      .setPath(IdPath)
      .addSuccess(Envelope(UtmPreset))
      .addError(E.NotFound)
      .annotate(scope, "links:write")
      .annotate(OpenApi.Summary, "Delete a UTM preset (the response shows it as it was)")
      .middleware(IdempotencyKey)
  )
  .middlewareEndpoints(Authentication) {}
