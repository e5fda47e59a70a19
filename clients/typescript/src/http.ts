/**
 * What the client says to a qemem server: an operation's request built from its route
 * (`requestOf`, the one place paths are made) and its exchange (`Transport`: the API key,
 * the timeout, retries of 503 and 429 with backoff, problem details as typed errors).
 */
import { errorOf, InputError, QememError } from "./errors.js";

/** How an operation travels over HTTP (the generated `ROUTES` hold one per operation). */
export interface RouteSpec {
  /** The operation's Python name (`add_messages`). */
  readonly name: string;
  readonly method: "GET" | "POST" | "DELETE";
  /** The path under the base URL, with `{name}` for each path parameter. */
  readonly path: string;
  readonly params: readonly string[];
  /** The fields sent in the query string. */
  readonly query: readonly string[];
  /** The fields of the JSON body (null: the request has none). */
  readonly body: readonly string[] | null;
  /** Parameter → the header that carries it. */
  readonly headers: Readonly<Record<string, string>>;
  /** Parameter → its name on the wire. */
  readonly rename: Readonly<Record<string, string>>;
  /** Fields sent with these values whatever the arguments. */
  readonly fixed: Readonly<Record<string, unknown>>;
  /** The field of the answer that is the result (null: the whole answer). */
  readonly unwrap: string | null;
}

/** What every method takes besides its arguments. */
export interface RequestOptions {
  /** Aborts the call (its requests and its waits), rejecting with the signal's reason. */
  signal?: AbortSignal;
}

/** One HTTP request: method, path under the base URL with its query, JSON body, headers. */
export interface Request {
  method: string;
  path: string;
  body: Record<string, unknown> | undefined;
  headers: Record<string, string>;
}

/** A successful answer's JSON (undefined when empty) and headers. */
export interface Reply {
  body: unknown;
  headers: Headers;
}

/**
 * `value` as one path segment: every reserved character percent-encoded (`/`, `#`, `?`,
 * `%` and spaces too), and the dot segments `.` and `..` spelled `%2E` so that nothing
 * resolves them.
 */
export function segment(value: string): string {
  if (value === "." || value === "..") {
    return "%2E".repeat(value.length);
  }
  return encode(value);
}

function encode(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** `value` when a header can carry it (printable ASCII), else InputError saying so. */
function headerValue(header: string, value: string): string {
  if (!/^[\x20-\x7e]*$/.test(value)) {
    throw new InputError(`the ${header} must be printable ASCII characters (a UUID, say)`);
  }
  return value;
}

function queryValue(value: unknown): string {
  return value instanceof Date ? value.toISOString() : String(value);
}

/**
 * The request of an operation with `args` (parameter → value; a value left undefined is not
 * sent, so that the server's default holds): each in the path, a header, the query or the
 * body as the route says (TypeError when one has no place).
 */
export function requestOf(route: RouteSpec, args: Record<string, unknown>): Request {
  const name = route.name;
  const wire: Record<string, unknown> = {};
  for (const [param, value] of Object.entries(args)) {
    if (value !== undefined) {
      wire[route.rename[param] ?? param] = value;
    }
  }
  Object.assign(wire, route.fixed);
  const take = (field: string): unknown => {
    const value = wire[field];
    delete wire[field];
    return value;
  };
  let path = route.path;
  for (const param of route.params) {
    const value = take(param);
    if (typeof value !== "string") {
      throw new TypeError(`${name}: ${param} must be a string`);
    }
    path = path.replace(`{${param}}`, segment(value));
  }
  const headers: Record<string, string> = {};
  for (const [param, header] of Object.entries(route.headers)) {
    const value = take(param);
    if (value !== undefined && value !== null) {
      headers[header] = headerValue(header, String(value));
    }
  }
  const query = route.query
    .map((field) => [field, take(field)] as const)
    .filter(([, value]) => value !== undefined && value !== null)
    .map(([field, value]) => `${encode(field)}=${encode(queryValue(value))}`);
  if (query.length > 0) {
    path += `?${query.join("&")}`;
  }
  let body: Record<string, unknown> | undefined;
  if (route.body !== null) {
    body = {};
    for (const field of route.body) {
      if (field in wire) {
        body[field] = take(field);
      }
    }
  }
  const left = Object.keys(wire);
  if (left.length > 0) {
    throw new TypeError(`${name}: the route has no place for ${left.sort().join(", ")}`);
  }
  return { method: route.method, path, body, headers };
}

/** How the client waits and retries. */
export interface TransportOptions {
  /** Milliseconds one request may take before it fails (default 120 000). */
  timeoutMs?: number;
  /** Retries of a request answered 503 or 429 (default 3; 0: none). */
  maxRetries?: number;
  /** The first backoff in milliseconds, doubled at each retry (default 500). */
  retryBaseMs?: number;
  /** The longest backoff in milliseconds (default 8 000). */
  retryMaxMs?: number;
  /** The longest wait a `Retry-After` header obtains, in milliseconds (default 300 000). */
  maxRetryAfterMs?: number;
  /** The `fetch` to use (default: the platform's). */
  fetch?: typeof fetch;
}

/** What a 503 says when the server has no LLM: asking again cannot help. */
const NO_LLM = "this server has none";

/**
 * Milliseconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date);
 * undefined when neither holds a usable value.
 */
export function retryAfterMs(headers: Headers, now: number = Date.now()): number | undefined {
  const ms = Number.parseFloat(headers.get("retry-after-ms") ?? "");
  if (Number.isFinite(ms)) {
    return Math.max(0, ms);
  }
  const value = headers.get("retry-after");
  if (value === null || value.trim() === "") {
    return undefined;
  }
  if (/^\s*[0-9.]+\s*$/.test(value)) {
    const seconds = Number.parseFloat(value);
    return Number.isFinite(seconds) ? Math.max(0, seconds * 1000) : undefined;
  }
  const when = Date.parse(value);
  return Number.isNaN(when) ? undefined : Math.max(0, when - now);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const done = (): void => {
      signal?.removeEventListener("abort", stop);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const stop = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

/** Sends requests to one server with one API key. */
export class Transport {
  readonly baseUrl: string;
  readonly #apiKey: string;
  readonly #timeoutMs: number;
  readonly #maxRetries: number;
  readonly #retryBaseMs: number;
  readonly #retryMaxMs: number;
  readonly #maxRetryAfterMs: number;
  readonly #fetch: typeof fetch;

  constructor(baseUrl: string, apiKey: string, options: TransportOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#apiKey = apiKey;
    this.#timeoutMs = options.timeoutMs ?? 120_000;
    this.#maxRetries = options.maxRetries ?? 3;
    this.#retryBaseMs = options.retryBaseMs ?? 500;
    this.#retryMaxMs = options.retryMaxMs ?? 8_000;
    this.#maxRetryAfterMs = options.maxRetryAfterMs ?? 300_000;
    // called as a plain function: a browser's fetch refuses another `this`
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /**
   * The answer to `request`; an error answer throws the `QememError` its problem names,
   * after the retries a 503 or 429 gets (none for a 503 saying the server has no LLM).
   */
  async send(request: Request, signal?: AbortSignal): Promise<Reply> {
    for (let attempt = 0; ; attempt++) {
      const response = await this.#exchange(request, signal);
      if (response.status < 400) {
        return { body: this.#json(response.text, response.status), headers: response.headers };
      }
      const error = errorOf(response.status, response.text);
      const retryable =
        (response.status === 429 || response.status === 503) && !error.message.includes(NO_LLM);
      if (!retryable || attempt >= this.#maxRetries) {
        throw error;
      }
      await sleep(this.#delay(attempt, response.headers), signal);
    }
  }

  /** A successful answer's JSON (undefined when empty). */
  #json(text: string, status: number): unknown {
    if (text === "") {
      return undefined;
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new QememError(
        `the server at ${this.baseUrl} answered HTTP ${status} with something other than JSON: ` +
          `${text.slice(0, 200)} (is it a qemem server?)`,
        status,
      );
    }
  }

  /** The wait before retry `attempt` (from 0): the server's Retry-After, else backoff. */
  #delay(attempt: number, headers: Headers): number {
    const asked = retryAfterMs(headers);
    if (asked !== undefined) {
      return Math.min(asked, this.#maxRetryAfterMs);
    }
    const backoff = Math.min(this.#retryMaxMs, this.#retryBaseMs * 2 ** attempt);
    return backoff * (0.5 + 0.5 * Math.random());
  }

  async #exchange(
    request: Request,
    signal?: AbortSignal,
  ): Promise<{ status: number; text: string; headers: Headers }> {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#apiKey}`,
      Accept: "application/json, application/problem+json",
      ...request.headers,
    };
    if (request.body !== undefined) {
      headers["Content-Type"] = "application/json";
    }
    try {
      const response = await this.#fetch(this.baseUrl + request.path, {
        method: request.method,
        headers,
        body: request.body === undefined ? null : JSON.stringify(request.body),
        signal: both,
      });
      return { status: response.status, text: await response.text(), headers: response.headers };
    } catch (exc) {
      if (signal?.aborted) {
        throw signal.reason;
      }
      if (timeout.aborted) {
        throw new QememError(
          `the qemem server at ${this.baseUrl} did not answer within ${this.#timeoutMs / 1000} s ` +
            "(raise timeoutMs for long operations)",
        );
      }
      const cause =
        exc instanceof Error && exc.cause instanceof Error ? exc.cause.message : String(exc);
      throw new QememError(
        `cannot reach the qemem server at ${this.baseUrl}: ${cause} (is \`qemem serve\` running there?)`,
      );
    }
  }
}
