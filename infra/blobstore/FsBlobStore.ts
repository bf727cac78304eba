import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect, Layer, Option } from "effect"
import { BlobStore, BlobStoreError, type BlobStoreShape, checkKey } from "../../domain/ports/BlobStore.js"
import { AppConfig } from "../AppConfig.js"

/**
 * Objects as files under `root`. A put writes a temporary file, fsyncs it and renames it
 * into place (then fsyncs the directory), so a crash leaves the old state or the new one,
 * never half a file.
 */
export const makeFsBlobStore = (root: string): BlobStoreShape => {
  const file = (key: string) => path.join(root, ...key.split("/"))
  const fail = (message: string) => (cause: unknown) => new BlobStoreError({ message, cause })
  return {
    put: (key, bytes) =>
      Effect.zipRight(
        checkKey(key),
        Effect.tryPromise({
          try: async () => {
            const target = file(key)
            const dir = path.dirname(target)
            await fs.mkdir(dir, { recursive: true })
            const tmp = path.join(dir, `.${path.basename(target)}.${randomBytes(6).toString("hex")}.tmp`)
            const handle = await fs.open(tmp, "w")
            try {
              await handle.writeFile(bytes)
              await handle.sync()
            } finally {
              await handle.close()
            }
            try {
              await fs.rename(tmp, target)
            } catch (e) {
              await fs.rm(tmp, { force: true })
              throw e
            }
            const dirHandle = await fs.open(dir, "r")
            try {
              await dirHandle.sync()
            } finally {
              await dirHandle.close()
            }
          },
          catch: fail(`writing blob ${key}`)
        })
      ),
    get: (key) =>
      Effect.zipRight(
        checkKey(key),
        Effect.tryPromise({
          try: async () => {
            try {
              return Option.some<Uint8Array>(await fs.readFile(file(key)))
            } catch (e) {
              if ((e as NodeJS.ErrnoException).code === "ENOENT") return Option.none<Uint8Array>()
              throw e
            }
          },
          catch: fail(`reading blob ${key}`)
        })
      ),
    remove: (key) =>
      Effect.zipRight(
        checkKey(key),
        Effect.tryPromise({ try: () => fs.rm(file(key), { force: true }), catch: fail(`removing blob ${key}`) })
      )
  }
}

/** The filesystem store under DATA_DIR/objects (the embedded default). */
export const FsBlobStoreLive = Layer.effect(
  BlobStore,
  Effect.map(AppConfig, (config) => makeFsBlobStore(path.resolve(config.dataDir, "objects")))
)
