import { Effect, Layer } from "effect"
import { Classifier, ClassifierError, type ClassifierShape } from "../../domain/ports/Classifier.js"

/** IMAGE_CLASSIFIER=none: nothing is classified; `auto` images stay `unrated`. */
export const noneClassifier: ClassifierShape = {
  name: "none",
  enabled: false,
  classify: () => Effect.fail(new ClassifierError({ message: "no content classifier is configured" }))
}

export const NoneClassifierLive = Layer.succeed(Classifier, noneClassifier)
