/**
 * qemem's TypeScript client: `QememClient` speaks to a qemem server (`qemem serve`) over
 * its HTTP API, with the types of its OpenAPI document.
 */
export { QememClient, BATCH } from "./client.js";
export type {
  BuildOptions,
  ClientOptions,
  FactsOptions,
  IngestOptions,
  IngestReport,
  IterJobsOptions,
  MessageRecord,
  Progress,
} from "./client.js";
export {
  AuthError,
  ConflictError,
  InputError,
  LLMError,
  NotFoundError,
  QememError,
  StoreError,
} from "./errors.js";
export { segment } from "./http.js";
export type { RequestOptions, TransportOptions } from "./http.js";
export type * from "./generated/methods.js";
export type * from "./generated/types.js";
