/**
 * Entry point of a converter child process (forked by ImageCodec.ts with a lower OS
 * priority): runs one plan at a time and answers over the IPC channel.
 */
import sharp from "sharp"
import { type Converted, type Outcome, type Plan, runPlan, type Tier } from "./Pipeline.js"

export interface ConvertRequest {
  readonly id: number
  readonly bytes: Uint8Array
  readonly plan: Plan
  readonly tier: Tier
  readonly timeoutSeconds: number
}

export type ConvertReply = { readonly id: number } & Outcome<Converted>

// One libvips worker thread and no operation cache: the child converts one image at a time,
// each image once, and its memory should fall back after every job.
sharp.concurrency(1)
sharp.cache(false)

const send = process.send?.bind(process)
if (send === undefined) {
  console.error("ConverterProcess.ts runs only as a child process with an IPC channel")
  process.exit(2)
}

process.on("disconnect", () => process.exit(0))
process.on("message", (request: ConvertRequest) => {
  runPlan(request.bytes, request.plan, request.tier, request.timeoutSeconds).then(
    (outcome) => send({ id: request.id, ...outcome } satisfies ConvertReply),
    (e: unknown) =>
      send({
        id: request.id,
        ok: false,
        error: { _tag: "EncodeFailed", message: `converter: ${e instanceof Error ? e.message : String(e)}` }
      } satisfies ConvertReply)
  )
})
send("ready")
