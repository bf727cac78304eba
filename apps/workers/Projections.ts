import { Topics } from "../../domain/Events.js"

/** The projections `cli replay --into` can rebuild, with the topic each is built from. */
export const Projections = { analytics: Topics.clicks } as const
export type Projection = keyof typeof Projections
