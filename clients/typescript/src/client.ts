/**
 * `QememClient`: the operations of a qemem server (`qemem serve`) with the semantics of the
 * Python `RemoteMemory`: the same operations (camelCase), the same results, the errors of
 * the same names. The methods of single requests are generated (`generated/methods.ts`);
 * those made of several requests, or finished here, are below.
 */
import { QememError, NotFoundError } from "./errors.js";
import { ROUTES, GeneratedMethods } from "./generated/methods.js";
import type { BuildReport, Episode, Job, MessageIn, SemanticFact } from "./generated/types.js";
import { requestOf, sleep, Transport } from "./http.js";
import type { Reply, RequestOptions, RouteSpec, TransportOptions } from "./http.js";

/** How the client connects, waits and retries. */
export interface ClientOptions extends TransportOptions {
  /** Milliseconds between polls of a build's job (default 500). */
  pollMs?: number;
}

/** Called with (done, total) as long operations advance. */
export type Progress = (done: number, total: number) => void;

/** A message of a conversation as the JSON Lines format writes it: a message and its conversation. */
export interface MessageRecord extends MessageIn {
  conversation_id: string;
}

/** What an ingest did, per conversation id: [sessions, turns] added. */
export interface IngestReport {
  added: Record<string, [number, number]>;
  seconds: number;
}

/** The options of `ingest`. */
export interface IngestOptions extends RequestOptions {
  progress?: Progress;
  /**
   * Makes the ingest safe to retry: batch `n` (from 0) is sent with the Idempotency-Key
   * `${idempotency_key}-${n}`, so the same records sent again with the same key store nothing.
   */
  idempotency_key?: string;
}

/** The options of `facts`. */
export interface FactsOptions extends RequestOptions {
  /** The facts known on this date (ISO 8601), instead of the current ones. */
  as_of?: string | Date | null;
  /** With the facts a supersession replaced. */
  include_superseded?: boolean;
}

/** The options of `build`. */
export interface BuildOptions extends RequestOptions {
  progress?: Progress;
}

/** The options of `iterJobs`. */
export interface IterJobsOptions extends RequestOptions {
  /** Jobs per request (1 to 500, default 50). */
  limit?: number;
}

/** Messages per request when ingesting (as the Python clients send them). */
export const BATCH = 200;

/** A qemem server seen through the operations of its HTTP API (the key's namespace). */
export class QememClient extends GeneratedMethods {
  readonly #transport: Transport;
  readonly pollMs: number;

  constructor(baseUrl: string, apiKey: string, options: ClientOptions = {}) {
    super();
    this.#transport = new Transport(baseUrl, apiKey, options);
    this.pollMs = options.pollMs ?? 500;
  }

  /** The server's base URL (without a trailing slash). */
  get baseUrl(): string {
    return this.#transport.baseUrl;
  }

  protected async call(
    route: RouteSpec,
    args: Record<string, unknown>,
    options: RequestOptions,
  ): Promise<unknown> {
    const { body } = await this.#exchange(route, args, options);
    if (route.unwrap === null) {
      return body;
    }
    return (body as Record<string, unknown>)[route.unwrap];
  }

  async #exchange(
    route: RouteSpec,
    args: Record<string, unknown>,
    options: RequestOptions,
  ): Promise<Reply> {
    const { signal, ...keywords } = options;
    const request = requestOf(route, { ...args, ...keywords });
    return this.#transport.send(request, signal);
  }

  /** Deletes a conversation and everything derived from it: true, or false when there was none. */
  async delete(conversation: string, options: RequestOptions = {}): Promise<boolean> {
    try {
      await this.call(ROUTES.delete, { conversation }, options);
    } catch (exc) {
      if (exc instanceof NotFoundError) {
        return false;
      }
      throw exc;
    }
    return true;
  }

  /** The conversation's episodes in order (only those of `ids`, in their order, when given). */
  async episodes(
    conversation: string,
    ids?: readonly string[] | null,
    options: RequestOptions = {},
  ): Promise<Episode[]> {
    const found = (await this.call(ROUTES.episodes, { conversation }, options)) as Episode[];
    return ids === undefined || ids === null ? found : select(found, ids);
  }

  /**
   * The conversation's current facts, or those known `as_of` a date; with `ids`, exactly
   * those facts (current or not), in their order.
   */
  async facts(
    conversation: string,
    ids?: readonly string[] | null,
    options: FactsOptions = {},
  ): Promise<SemanticFact[]> {
    const args: Record<string, unknown> = { conversation };
    const { signal, ...query } = options;
    Object.assign(args, ids === undefined || ids === null ? query : { include_superseded: true });
    const found = (await this.call(ROUTES.facts, args, { signal })) as SemanticFact[];
    return ids === undefined || ids === null ? found : select(found, ids);
  }

  /**
   * Appends message records (the JSON Lines format's: each with its `conversation_id`),
   * grouped by conversation in order of first appearance, `BATCH` messages per request.
   */
  async ingest(
    records: Iterable<MessageRecord>,
    options: IngestOptions = {},
  ): Promise<IngestReport> {
    const started = performance.now();
    const { progress, idempotency_key, signal } = options;
    const grouped = new Map<string, MessageIn[]>();
    for (const { conversation_id, ...message } of records) {
      const batch = grouped.get(conversation_id);
      if (batch === undefined) {
        grouped.set(conversation_id, [message]);
      } else {
        batch.push(message);
      }
    }
    const total = [...grouped.values()].reduce((sum, batch) => sum + batch.length, 0);
    const report: IngestReport = { added: {}, seconds: 0 };
    let done = 0;
    let batch = 0;
    for (const [conversation, messages] of grouped) {
      let sessions = 0;
      let turns = 0;
      for (let start = 0; start < messages.length; start += BATCH) {
        const key = idempotency_key === undefined ? undefined : `${idempotency_key}-${batch}`;
        batch += 1;
        const chunk = messages.slice(start, start + BATCH);
        const appended = await this.addMessages(conversation, chunk, {
          idempotency_key: key,
          signal,
        });
        sessions += appended.sessions_added;
        turns += appended.turns_added;
        done += appended.ids.length;
        progress?.(done, total);
      }
      report.added[conversation] = [sessions, turns];
    }
    report.seconds = (performance.now() - started) / 1000;
    return report;
  }

  /**
   * Builds episodes and facts: a build job per conversation (all of them by default), each
   * polled to its end; their reports. A job that fails or is cancelled throws.
   */
  async build(conversation?: string | null, options: BuildOptions = {}): Promise<BuildReport[]> {
    const { progress, signal } = options;
    const targets = conversation
      ? [conversation]
      : (await this.conversations({ signal })).map((c) => c.id);
    const reports: BuildReport[] = [];
    for (const target of targets) {
      let job = await this.enqueueBuild(target, { signal });
      while (job.status === "queued" || job.status === "running") {
        await sleep(this.pollMs, signal);
        job = await this.job(job.id, { signal });
        if (progress && job.total) {
          progress(job.done ?? 0, job.total);
        }
      }
      if (job.status !== "done") {
        throw new QememError(`the build of ${target} ${job.status} on the server: ${job.error}`);
      }
      reports.push(...(job.reports ?? []));
    }
    return reports;
  }

  /**
   * Every job of the caller (only those of `status`, when given), newest first, fetched a
   * page at a time (following each answer's `X-Next-Cursor`) as the iteration goes.
   */
  async *iterJobs(
    status?: Job["status"] | null,
    options: IterJobsOptions = {},
  ): AsyncGenerator<Job> {
    const { signal, limit } = options;
    let before: string | null = null;
    do {
      const reply = await this.#exchange(ROUTES.jobs, { status, limit, before }, { signal });
      yield* reply.body as Job[];
      before = reply.headers.get("X-Next-Cursor");
    } while (before !== null);
  }
}

function select<R extends { id: string }>(records: R[], ids: readonly string[]): R[] {
  const byId = new Map(records.map((r) => [r.id, r]));
  return ids.flatMap((id) => {
    const record = byId.get(id);
    return record === undefined ? [] : [record];
  });
}
