export {
  type Client,
  ClientLive,
  type ClientOptions,
  makeClient,
  newIdempotencyKey,
  withIdempotencyKey
} from "./Client.js"
export { ApiError, type ErrorBody, hasCode, isErrorBody } from "./Errors.js"
export { type CallOptions, createClient, type PromiseClient } from "./Promise.js"
