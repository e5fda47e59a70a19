/**
 * The errors of the client, one tree rooted at `QememError`, as the Python remote clients
 * raise them: an error answer's problem details (RFC 9457) become the class of its status.
 */
import type { Problem } from "./generated/types.js";

/** Root of every error the client throws on purpose. */
export class QememError extends Error {
  /** The HTTP status of the answer, when there was one. */
  readonly status: number | undefined;
  /** The answer's problem details, when it sent them. */
  readonly problem: Problem | undefined;

  constructor(message: string, status?: number, problem?: Problem) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.problem = problem;
  }
}

/** The request was refused as malformed (HTTP 422, or a body too large: 413). */
export class InputError extends QememError {}

/** The request conflicts with what is stored (HTTP 409). */
export class ConflictError extends InputError {}

/** The store cannot do what was asked (HTTP 503 not about the LLM). */
export class StoreError extends QememError {}

/** No such conversation, message, fact or job (HTTP 404). */
export class NotFoundError extends StoreError {}

/** The server has no LLM for this, or its LLM failed (HTTP 503 about the LLM). */
export class LLMError extends QememError {}

/** A missing or unknown API key (HTTP 401), or one that may not do this (HTTP 403). */
export class AuthError extends QememError {}

const BY_STATUS: Record<number, typeof QememError> = {
  401: AuthError,
  403: AuthError,
  404: NotFoundError,
  409: ConflictError,
  413: InputError,
  422: InputError,
};

function problemOf(text: string): Problem | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null ? (parsed as Problem) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The error an answer of status `status` (at least 400) with body `text` stands for: its
 * problem's `detail` and the status, as the Python clients word it.
 */
export function errorOf(status: number, text: string): QememError {
  const problem = problemOf(text);
  const detail = typeof problem?.detail === "string" ? problem.detail : text;
  let kind = BY_STATUS[status];
  if (kind === undefined && status === 503) {
    kind = detail.includes("LLM") ? LLMError : StoreError;
  }
  return new (kind ?? QememError)(`${detail} (HTTP ${status})`, status, problem);
}
