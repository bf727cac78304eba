import { Config, Effect, Layer } from "effect"
import { Classifier, type ClassifierShape } from "../../domain/ports/Classifier.js"
import { makeHttpClassifier } from "./HttpClassifier.js"
import { noneClassifier } from "./NoneClassifier.js"
import { defaultNsfwjsOptions, makeNsfwjsClassifier, NSFWJS_MODELS, type NsfwjsModel } from "./NsfwjsClassifier.js"

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be a positive integer", validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

const timeoutSeconds = positive("IMAGE_CLASSIFIER_TIMEOUT_SECONDS", defaultNsfwjsOptions.timeoutSeconds)

const nsfwjsConfig = Config.all({
  model: Config.literal(...NSFWJS_MODELS)("IMAGE_CLASSIFIER_MODEL").pipe(
    Config.withDefault<NsfwjsModel>(defaultNsfwjsOptions.model)
  ),
  nice: Config.integer("IMAGE_CLASSIFIER_NICE").pipe(
    Config.validate({ message: "must be an integer from 0 to 19", validation: (n) => n >= 0 && n <= 19 }),
    Config.withDefault(defaultNsfwjsOptions.nice)
  ),
  timeoutSeconds,
  maxQueue: positive("IMAGE_CLASSIFIER_MAX_QUEUE", defaultNsfwjsOptions.maxQueue)
})

const httpConfig = Config.all({
  url: Config.string("IMAGE_CLASSIFIER_URL").pipe(
    Config.validate({
      message: "must be an http:// or https:// URL",
      validation: (s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol)
    })
  ),
  token: Config.option(Config.redacted("IMAGE_CLASSIFIER_TOKEN")),
  timeoutSeconds
})

/**
 * The classifier chosen by IMAGE_CLASSIFIER:
 * - `nsfwjs` (default): the model shipped in the nsfwjs package on TensorFlow.js WASM, in a
 *   child process at IMAGE_CLASSIFIER_NICE (10); IMAGE_CLASSIFIER_MODEL = MobileNetV2Mid
 *   (default) | MobileNetV2 | InceptionV3; IMAGE_CLASSIFIER_MAX_QUEUE (64) images may wait.
 *   The model is loaded in the background when the layer starts.
 * - `http`: POST the image to IMAGE_CLASSIFIER_URL (protocol in HttpClassifier.ts), with
 *   IMAGE_CLASSIFIER_TOKEN as a bearer token when set.
 * - `none`: nothing is classified; `auto` images stay `unrated`.
 * IMAGE_CLASSIFIER_TIMEOUT_SECONDS (30) bounds one classification with nsfwjs or http.
 */
export const ClassifierLive = Layer.scoped(
  Classifier,
  Effect.gen(function* () {
    const kind = yield* Config.literal("nsfwjs", "http", "none")("IMAGE_CLASSIFIER").pipe(Config.withDefault("nsfwjs"))
    switch (kind) {
      case "none": {
        yield* Effect.logInfo("image classifier: none (IMAGE_CLASSIFIER=none); images uploaded with auto stay unrated")
        return noneClassifier
      }
      case "http": {
        const config = yield* httpConfig
        yield* Effect.logInfo(`image classifier: http, POST to ${new URL(config.url).origin}`)
        return makeHttpClassifier(config)
      }
      case "nsfwjs": {
        const config = yield* nsfwjsConfig
        const nsfwjs = yield* makeNsfwjsClassifier({ ...defaultNsfwjsOptions, ...config })
        yield* nsfwjs.warmUp.pipe(
          Effect.catchAll((e) =>
            Effect.logWarning(`image classifier: ${e.message}; images stay unrated until it loads`)
          ),
          Effect.forkScoped
        )
        return nsfwjs.classifier satisfies ClassifierShape
      }
    }
  })
)
