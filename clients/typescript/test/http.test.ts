/**
 * The client's exchange without qemem: requests built from routes (paths percent-encoded
 * whole), retries of 503 and 429 (Retry-After honoured, backoff otherwise, none for a server
 * without an LLM), timeouts and aborts, against a small local HTTP server that answers what
 * each test scripts.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, it } from "node:test";

import {
  InputError,
  LLMError,
  QememClient,
  QememError,
  StoreError,
  segment,
} from "../src/index.js";
import { ROUTES } from "../src/generated/methods.js";
import { requestOf, retryAfterMs } from "../src/http.js";

interface Scripted {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** The body as it is (not JSON). */
  raw?: string;
  /** Never answer (a server that hangs). */
  hang?: boolean;
}

let server: Server;
let baseUrl: string;
let script: Scripted[] = [];
let seen: { method: string; url: string; at: number; headers: IncomingMessage["headers"] }[] = [];

function answer(request: IncomingMessage, response: ServerResponse): void {
  seen.push({
    method: request.method ?? "",
    url: request.url ?? "",
    at: Date.now(),
    headers: request.headers,
  });
  const next = script.shift() ?? { status: 200, body: [] };
  if (next.hang) {
    return;
  }
  const problem = next.status >= 400;
  response.writeHead(next.status, {
    "Content-Type": problem ? "application/problem+json" : "application/json",
    ...next.headers,
  });
  response.end(next.raw ?? (next.body === undefined ? "" : JSON.stringify(next.body)));
}

function problem(
  status: number,
  detail: string,
): { status: number; title: string; detail: string } {
  return { status, title: "", detail };
}

before(async () => {
  server = createServer(answer);
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
});

beforeEach(() => {
  script = [];
  seen = [];
});

function client(options: ConstructorParameters<typeof QememClient>[2] = {}): QememClient {
  return new QememClient(baseUrl, "secret", { retryBaseMs: 10, retryMaxMs: 40, ...options });
}

describe("requests", () => {
  it("percent-encodes each path segment whole, dot segments too", () => {
    assert.equal(segment("a #b?c d%/e"), "a%20%23b%3Fc%20d%25%2Fe");
    assert.equal(segment("it's (x)*!"), "it%27s%20%28x%29%2A%21");
    assert.equal(segment(".."), "%2E%2E");
    const request = requestOf(ROUTES.delete_message, { conversation: "c #1", message: "m?2" });
    assert.equal(request.path, "/v1/conversations/c%20%231/messages/m%3F2");
    assert.equal(request.body, undefined);
  });

  it("puts each argument where the route says, renamed and fixed as declared", () => {
    const jobs = requestOf(ROUTES.jobs, { status: "done", limit: 5, before: "j #9" });
    assert.equal(jobs.path, "/v1/jobs?status=done&limit=5&cursor=j%20%239");
    const retrieve = requestOf(ROUTES.retrieve, {
      conversation: "c",
      question: "q?",
      exclude: undefined,
    });
    assert.deepEqual(retrieve.body, { pool: true, query: "q?" });
    const append = requestOf(ROUTES.add_messages, {
      conversation: "c",
      messages: [],
      idempotency_key: "k-1",
    });
    assert.deepEqual(append.headers, { "Idempotency-Key": "k-1" });
    const facts = requestOf(ROUTES.facts, {
      conversation: "c",
      as_of: new Date("2024-03-01T00:00:00Z"),
      include_superseded: false,
    });
    assert.equal(
      facts.path,
      "/v1/conversations/c/facts?as_of=2024-03-01T00%3A00%3A00.000Z&include_superseded=false",
    );
    assert.throws(
      () => requestOf(ROUTES.job, { job_id: "j", colour: "red" }),
      /job: the route has no place for colour/,
    );
  });

  it("refuses a header value that is not printable ASCII, before sending", () => {
    const args = { conversation: "c", messages: [], idempotency_key: "clé" };
    assert.throws(() => requestOf(ROUTES.add_messages, args), InputError);
  });

  it("sends the API key as a bearer token and the body as JSON", async () => {
    script = [{ status: 200, body: { ids: ["x"], turns_added: 1, sessions_added: 1 } }];
    await client().addMessages("c", [
      { session_id: "s", timestamp: "2024-01-01T00:00:00", speaker: "A", text: "hi" },
    ]);
    assert.equal(seen[0]?.headers.authorization, "Bearer secret");
    assert.equal(seen[0]?.headers["content-type"], "application/json");
  });
});

describe("retries", () => {
  it("retries a 503 and returns the answer that follows", async () => {
    script = [
      { status: 503, body: problem(503, "the store is busy") },
      { status: 200, body: [{ id: "c" }] },
    ];
    const listed = await client().conversations();
    assert.deepEqual(listed, [{ id: "c" }]);
    assert.equal(seen.length, 2);
  });

  it("waits as long as a 429's Retry-After says", async () => {
    script = [
      { status: 429, body: problem(429, "slow down"), headers: { "Retry-After": "1" } },
      { status: 200, body: [] },
    ];
    await client().conversations();
    const waited = (seen[1]?.at ?? 0) - (seen[0]?.at ?? 0);
    assert.ok(waited >= 900, `waited ${waited} ms`);
  });

  it("gives up after maxRetries with the error of the last answer", async () => {
    const busy = { status: 503, body: problem(503, "the store is busy") };
    script = [busy, busy, busy];
    const error = await client({ maxRetries: 2 })
      .conversations()
      .catch((exc: unknown) => exc);
    assert.ok(error instanceof StoreError);
    assert.equal(error.status, 503);
    assert.equal(seen.length, 3);
  });

  it("does not retry a 503 saying the server has no LLM", async () => {
    const detail =
      "checking a statement needs an LLM and this server has none: start it with --llm";
    script = [{ status: 503, body: problem(503, detail) }];
    await assert.rejects(client().check("c", "a statement"), LLMError);
    assert.equal(seen.length, 1);
  });

  it("does not retry other errors", async () => {
    script = [{ status: 500, body: problem(500, "internal error: see the server log") }];
    const error = await client()
      .conversations()
      .catch((exc: unknown) => exc);
    assert.ok(error instanceof QememError && error.constructor === QememError);
    assert.equal(seen.length, 1);
  });

  it("says so when a success is not JSON (not a qemem server)", async () => {
    script = [{ status: 200, raw: "<html>a login page</html>" }];
    await assert.rejects(
      client().conversations(),
      /answered HTTP 200 with something other than JSON/,
    );
  });

  it("reads Retry-After in seconds, milliseconds or as an HTTP date", () => {
    const now = Date.parse("2024-01-01T00:00:00Z");
    assert.equal(retryAfterMs(new Headers({ "retry-after": "2" }), now), 2000);
    assert.equal(
      retryAfterMs(new Headers({ "retry-after-ms": "150", "retry-after": "9" }), now),
      150,
    );
    assert.equal(
      retryAfterMs(new Headers({ "retry-after": "Mon, 01 Jan 2024 00:00:03 GMT" }), now),
      3000,
    );
    assert.equal(retryAfterMs(new Headers({ "retry-after": "soon" }), now), undefined);
    assert.equal(retryAfterMs(new Headers(), now), undefined);
  });
});

describe("timeouts and aborts", () => {
  it("fails a request the server does not answer within timeoutMs", async () => {
    script = [{ status: 200, hang: true }];
    await assert.rejects(client({ timeoutMs: 200 }).conversations(), /did not answer within 0.2 s/);
  });

  it("rejects with the signal's reason when the caller aborts, during a retry's wait too", async () => {
    script = [{ status: 503, body: problem(503, "busy"), headers: { "Retry-After": "30" } }];
    const controller = new AbortController();
    const pending = client().conversations({ signal: controller.signal });
    setTimeout(() => controller.abort(new Error("stopped by the caller")), 100);
    await assert.rejects(pending, /stopped by the caller/);
    assert.equal(seen.length, 1);
  });
});

describe("paging", () => {
  it("follows X-Next-Cursor until a page comes without one", async () => {
    script = [
      { status: 200, body: [{ id: "j3" }, { id: "j2" }], headers: { "X-Next-Cursor": "j2" } },
      { status: 200, body: [{ id: "j1" }] },
    ];
    const ids: string[] = [];
    for await (const job of client().iterJobs("done", { limit: 2 })) {
      ids.push(job.id);
    }
    assert.deepEqual(ids, ["j3", "j2", "j1"]);
    assert.deepEqual(
      seen.map((s) => s.url),
      ["/v1/jobs?status=done&limit=2", "/v1/jobs?status=done&limit=2&cursor=j2"],
    );
  });
});
