/**
 * The client against a live `qemem serve` (offline LLM): every operation of the HTTP API, its
 * errors as typed errors, idempotent appends and ingests, the paging of jobs, and ids holding
 * `#`, `?`, `%` and spaces.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  AuthError,
  InputError,
  NotFoundError,
  QememClient,
  QememError,
  type MessageIn,
  type MessageRecord,
} from "../src/index.js";
import { serve, type Served } from "./server.js";

const ODD = "a #b?c d%";
const ODD_MESSAGE = "m #1?x y";

function messages(session: string, day: string): MessageIn[] {
  return [
    {
      session_id: session,
      timestamp: `${day}T10:00:00`,
      speaker: "Alice",
      role: "user",
      text: "I adopted a dog named Rex last week.",
    },
    {
      session_id: session,
      timestamp: `${day}T10:01:00`,
      speaker: "Bot",
      role: "assistant",
      text: "Congratulations on adopting Rex!",
    },
    {
      session_id: session,
      timestamp: `${day}T10:02:00`,
      speaker: "Alice",
      role: "user",
      text: "I moved to Berlin for a new job at a bakery.",
    },
  ];
}

let server: Served;
let memory: QememClient;

before(async () => {
  server = await serve();
  memory = new QememClient(server.baseUrl, server.key, { pollMs: 50 });
});

after(async () => {
  await server?.stop();
});

describe("appending", () => {
  it("appends messages; a message id sent again is acknowledged, not stored twice", async () => {
    const batch = messages("s1", "2024-03-01").map((m, i) => ({ ...m, id: `t${i}` }));
    const first = await memory.addMessages("append", batch);
    assert.deepEqual(first.ids, ["t0", "t1", "t2"]);
    assert.equal(first.turns_added, 3);
    const again = await memory.addMessages("append", batch);
    assert.equal(again.turns_added, 0);
    assert.equal((await memory.conversation("append")).sessions.length, 1);
  });

  it("answers a batch sent again with its Idempotency-Key as the first time, storing nothing", async () => {
    const batch = messages("s1", "2024-03-01");
    const first = await memory.addMessages("keyed", batch, { idempotency_key: "key-1" });
    const retry = await memory.addMessages("keyed", batch, { idempotency_key: "key-1" });
    assert.deepEqual(retry, first);
    const without = await memory.addMessages("keyed", batch.slice(0, 1));
    assert.equal(without.turns_added, 1, "without a key the same message is stored again");
    const turns = (await memory.search("keyed", "dog", { k: null })).length;
    assert.equal(turns, 4);
    await assert.rejects(
      memory.addMessages("keyed", batch.slice(1), { idempotency_key: "key-1" }),
      (exc: unknown) => exc instanceof InputError && exc.status === 422,
    );
  });

  it("ingests records by conversation, and again with its key stores nothing", async () => {
    const records: MessageRecord[] = [
      ...messages("s1", "2024-03-01").map((m) => ({ ...m, conversation_id: "ingest-a" })),
      ...messages("s1", "2024-04-01").map((m) => ({ ...m, conversation_id: "ingest-b" })),
    ];
    const seen: number[] = [];
    const report = await memory.ingest(records, {
      idempotency_key: "ingest-1",
      progress: (done) => seen.push(done),
    });
    assert.deepEqual(report.added, { "ingest-a": [1, 3], "ingest-b": [1, 3] });
    assert.deepEqual(seen, [3, 6]);
    await memory.ingest(records, { idempotency_key: "ingest-1" });
    assert.equal((await memory.search("ingest-a", "Rex", { k: null })).length, 3);
    const unkeyed = await memory.ingest(records.slice(0, 1));
    assert.deepEqual(unkeyed.added, { "ingest-a": [0, 1] });
  });
});

describe("building and asking", () => {
  before(async () => {
    await memory.addMessages(ODD, [
      { ...messages("s1", "2024-03-01")[0]!, id: ODD_MESSAGE },
      ...messages("s1", "2024-03-01").slice(1),
      ...messages("s2", "2024-03-05"),
    ]);
  });

  it("builds episodes and facts with a job, polled to its end", async () => {
    const progress: number[] = [];
    const reports = await memory.build(ODD, { progress: (done) => progress.push(done) });
    assert.equal(reports.length, 1);
    assert.equal(reports[0]?.conversation, ODD);
    assert.ok((await memory.episodes(ODD)).length > 0);
    const listed = await memory.conversations();
    assert.ok(listed.some((c) => c.id === ODD && c.episodes > 0));
  });

  it("searches, retrieves and searches across conversations", async () => {
    const hits = await memory.search(ODD, "dog Rex", { k: 2 });
    assert.equal(hits.length, 2);
    assert.ok(hits.every((h) => h.conversation === ODD));
    const pool = await memory.retrieve(ODD, "Where did Alice move?");
    assert.equal(pool.conversation, ODD);
    assert.ok((pool.turns ?? []).length > 0);
    const across = await memory.searchMany([ODD, "append"], "Berlin bakery");
    assert.ok(new Set(across.map((h) => h.conversation)).size === 2);
  });

  it("gives a context block, over one conversation and several", async () => {
    const context = await memory.context(ODD, "What is the dog called?", { budget_tokens: 500 });
    assert.match(context.text, /Rex/);
    const many = await memory.contextMany([ODD, "append"], "What is the dog called?");
    assert.ok((many.items ?? []).length > 0);
  });

  it("asks in the retrieval, full and respond modes, and across conversations", async () => {
    const retrieval = await memory.ask(ODD, "What is the dog's name?", { mode: "retrieval" });
    assert.equal(retrieval.mode, "retrieval");
    assert.equal(retrieval.text, "");
    const full = await memory.ask(ODD, "Where did Alice move?");
    assert.equal(full.mode, "full");
    const respond = await memory.ask(ODD, "What is the dog's name?", { mode: "respond" });
    assert.equal(respond.mode, "respond");
    assert.match(respond.text, /Rex/);
    assert.ok(respond.citations.includes(ODD_MESSAGE));
    const many = await memory.askMany([ODD, "append"], "What is the dog's name?", {
      mode: "retrieval",
    });
    assert.deepEqual(many.across?.conversations, [ODD, "append"]);
  });

  it("checks a statement against the turns", async () => {
    const result = await memory.check(ODD, "Alice adopted a dog named Rex.");
    assert.equal(result.claims[0]?.label, "supported");
    assert.equal(result.claims[0]?.citations?.[0]?.turn, ODD_MESSAGE);
  });

  it("audits the memory", async () => {
    const audit = await memory.auditMemory(ODD, { sample: 4, seed: 1 });
    assert.equal(audit.conversation, ODD);
  });

  it("corrects and deletes facts; ids select facts current or not", async () => {
    const facts = await memory.facts(ODD);
    assert.ok(facts.length > 0);
    const old = facts[0]!;
    const supersession = await memory.correctFact(ODD, old.id, "Alice's dog is called Rex.");
    assert.equal(supersession.old, old.id);
    const current = (await memory.facts(ODD)).map((f) => f.id);
    assert.ok(!current.includes(old.id) && current.includes(supersession.new));
    const chosen = await memory.facts(ODD, [supersession.new, old.id, "no-such-fact"]);
    assert.deepEqual(
      chosen.map((f) => f.id),
      [supersession.new, old.id],
    );
    assert.equal(
      (await memory.facts(ODD, null, { include_superseded: true })).length,
      facts.length + 1,
    );
    assert.equal((await memory.supersessions(ODD)).length, 1);
    assert.deepEqual(
      await memory.facts(ODD, null, { as_of: new Date("2000-01-01T00:00:00Z") }),
      [],
    );
    assert.equal((await memory.facts(ODD, null, { as_of: "2100-01-01" })).length, current.length);
    const forgotten = await memory.deleteFact(ODD, supersession.new);
    assert.deepEqual(forgotten.restored, [old.id]);
    const episodes = await memory.episodes(ODD);
    const picked = await memory.episodes(ODD, [episodes[0]!.id, "nope"]);
    assert.deepEqual(
      picked.map((e) => e.id),
      [episodes[0]!.id],
    );
  });

  it("redacts and deletes a message whose id holds #, ? and a space", async () => {
    const redacted = await memory.redactMessage(ODD, ODD_MESSAGE);
    assert.deepEqual(redacted.redacted, [ODD_MESSAGE]);
    const deleted = await memory.deleteMessage(ODD, ODD_MESSAGE);
    assert.deepEqual(deleted.deleted, [ODD_MESSAGE]);
    await assert.rejects(memory.deleteMessage(ODD, ODD_MESSAGE), NotFoundError);
  });

  it("deletes a conversation: true, then false, and it is gone", async () => {
    assert.equal(await memory.delete(ODD), true);
    assert.equal(await memory.delete(ODD), false);
    await assert.rejects(memory.conversation(ODD), NotFoundError);
  });
});

describe("jobs", () => {
  it("pages through every job with the async iterator, and cancels one", async () => {
    const ids: string[] = [];
    for (const conversation of ["append", "keyed", "ingest-a", "ingest-b"]) {
      ids.push((await memory.enqueueBuild(conversation)).id);
    }
    const page = await memory.jobs(null, { limit: 2 });
    assert.equal(page.length, 2);
    const next = await memory.jobs(null, { limit: 2, before: page[1]!.id });
    assert.ok(next.length > 0 && next.every((j) => !page.some((p) => p.id === j.id)));
    const listed: string[] = [];
    for await (const job of memory.iterJobs(null, { limit: 2 })) {
      listed.push(job.id);
    }
    assert.equal(new Set(listed).size, listed.length);
    // four new jobs, two a page: each listed means the iterator went past the first page
    for (const id of ids) {
      assert.ok(listed.includes(id));
    }
    const job = await memory.cancelJob(ids[ids.length - 1]!);
    assert.ok(["cancelled", "done", "failed"].includes(job.status));
    assert.equal((await memory.job(job.id)).id, job.id);
  });
});

describe("errors", () => {
  it("maps a missing or unknown key to AuthError (401) with its problem details", async () => {
    const stranger = new QememClient(server.baseUrl, "qm_not_a_key");
    const error = await stranger.conversations().catch((exc: unknown) => exc);
    assert.ok(error instanceof AuthError);
    assert.equal(error.status, 401);
    assert.equal(error.problem?.status, 401);
    assert.match(error.message, /\(HTTP 401\)$/);
  });

  it("maps a write with a read-only key to AuthError (403)", async () => {
    const reader = new QememClient(server.baseUrl, server.readOnlyKey);
    await assert.rejects(
      reader.addMessages("append", messages("s9", "2024-05-01")),
      (exc: unknown) => exc instanceof AuthError && exc.status === 403,
    );
  });

  it("maps an unknown conversation, message or job to NotFoundError (404)", async () => {
    await assert.rejects(memory.conversation("no such conversation"), NotFoundError);
    await assert.rejects(memory.deleteMessage("append", "no#such?message"), NotFoundError);
    await assert.rejects(
      memory.job("no-such-job"),
      (exc: unknown) => exc instanceof NotFoundError && exc.status === 404,
    );
  });

  it("maps bad input to InputError (422), storing nothing", async () => {
    await assert.rejects(
      memory.ask("append", "   "),
      (exc: unknown) => exc instanceof InputError && exc.status === 422,
    );
    await assert.rejects(
      memory.addMessages("append", [
        { session_id: "s1", timestamp: "not a date", speaker: "A", text: "x" },
      ]),
      InputError,
    );
    await assert.rejects(memory.addMessages("bad/slash", messages("s1", "2024-03-01")), InputError);
    await assert.rejects(memory.conversation("bad/slash"), InputError);
  });

  it("refuses an option the route has no place for, before sending", async () => {
    const options = { mode: "retrieval", colour: "red" } as unknown as { mode: "retrieval" };
    await assert.rejects(memory.ask("append", "dog?", options), /no place for colour/);
  });

  it("says when the server cannot be reached", async () => {
    const nowhere = new QememClient("http://127.0.0.1:9", "k", { maxRetries: 0 });
    await assert.rejects(
      nowhere.conversations(),
      (exc: unknown) => exc instanceof QememError && /cannot reach/.test(exc.message),
    );
  });
});
