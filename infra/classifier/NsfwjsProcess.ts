/**
 * Entry point of the nsfwjs child process (forked by NsfwjsClassifier.ts under `nice`):
 * loads TensorFlow.js with the WASM backend (its .wasm files from node_modules) and the
 * model that ships inside the nsfwjs package once, then classifies one image at a time and
 * answers over the IPC channel. Nothing is fetched from the network.
 */
import { createRequire } from "node:module"
import path from "node:path"
import sharp from "sharp"

/** The models that ship inside the nsfwjs package (NsfwjsClassifier.ts lists them for config). */
export type NsfwjsModel = "MobileNetV2" | "MobileNetV2Mid" | "InceptionV3"

export interface ClassifyRequest {
  readonly id: number
  readonly bytes: Uint8Array
}

export type ClassifyReply =
  | {
      readonly id: number
      readonly ok: true
      readonly scores: Record<string, number>
      readonly decodeMs: number
      readonly inferMs: number
    }
  | { readonly id: number; readonly ok: false; readonly message: string }

export type StartMessage =
  | { readonly type: "ready"; readonly backend: string; readonly loadMs: number }
  | { readonly type: "failed"; readonly message: string }

/** Published images are at most 16383 px a side; anything past this is not ours. */
const MAX_INPUT_PIXELS = 16_383 * 16_383

const send = process.send?.bind(process)
if (send === undefined) {
  console.error("NsfwjsProcess.ts runs only as a child process with an IPC channel")
  process.exit(2)
}
process.on("disconnect", () => process.exit(0))

sharp.concurrency(1)
sharp.cache(false)

const modelName = (process.env.NSFWJS_MODEL ?? "MobileNetV2Mid") as NsfwjsModel
const size = modelName === "InceptionV3" ? 299 : 224

/** RGB pixels of the first frame, stretched to the model's square input, alpha over white. */
const decode = async (bytes: Uint8Array): Promise<Uint8Array> => {
  const { data, info } = await sharp(bytes, { pages: 1, animated: false, limitInputPixels: MAX_INPUT_PIXELS })
    .resize(size, size, { fit: "fill" })
    .flatten({ background: "#ffffff" })
    .toColourspace("srgb")
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true })
  if (info.channels !== 3 || data.length !== size * size * 3) {
    throw new Error(`decoded to ${info.width}×${info.height}×${info.channels}, not ${size}×${size}×3`)
  }
  return data
}

/** Everything is loaded from local files: a fetch here would be a bug (and fails on machines without a network). */
const noNetwork = () => Promise.reject(new Error("the classifier process does not use the network"))

const start = async () => {
  const t0 = performance.now()
  globalThis.fetch = noNetwork
  const require = createRequire(import.meta.url)
  const tf = await import("@tensorflow/tfjs")
  tf.env().platform.fetch = noNetwork
  const wasm = await import("@tensorflow/tfjs-backend-wasm")
  wasm.setWasmPaths(`${path.dirname(require.resolve("@tensorflow/tfjs-backend-wasm"))}/`)
  if (!(await tf.setBackend("wasm"))) throw new Error("the TensorFlow.js WASM backend did not start")
  await tf.ready()
  tf.enableProdMode()
  // nsfwjs announces the model on console.info; the service's logs are not the place.
  const info = console.info
  console.info = () => {}
  const nsfwjs = await import("nsfwjs")
  const model = await nsfwjs.load(modelName)
  console.info = info
  send({ type: "ready", backend: tf.getBackend(), loadMs: Math.round(performance.now() - t0) } satisfies StartMessage)

  const classify = async (request: ClassifyRequest): Promise<ClassifyReply> => {
    const t1 = performance.now()
    const pixels = await decode(request.bytes)
    const t2 = performance.now()
    const input = tf.tensor3d(pixels, [size, size, 3], "int32")
    try {
      const predictions = await model.classify(input, 5)
      const scores: Record<string, number> = {}
      for (const p of predictions) scores[p.className] = p.probability
      return { id: request.id, ok: true, scores, decodeMs: t2 - t1, inferMs: performance.now() - t2 }
    } finally {
      input.dispose()
    }
  }

  // One at a time: the parent sends the next request after the answer, but be safe anyway.
  let chain: Promise<unknown> = Promise.resolve()
  process.on("message", (request: ClassifyRequest) => {
    chain = chain.then(() =>
      classify(request).then(
        (reply) => send(reply),
        (e: unknown) =>
          send({
            id: request.id,
            ok: false,
            message: e instanceof Error ? e.message : String(e)
          } satisfies ClassifyReply)
      )
    )
  })
}

start().catch((e: unknown) => {
  send({ type: "failed", message: e instanceof Error ? e.message : String(e) } satisfies StartMessage)
  setTimeout(() => process.exit(1), 100)
})
