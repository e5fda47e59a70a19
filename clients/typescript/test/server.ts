/**
 * A live `qemem serve` for the tests: a temporary SQLite store, an API key, a free port, the
 * offline LLM (`fake`) and the hash embedder; killed with its process group at the end.
 * `QEMEM_BIN` names the qemem command (default: the repository's `.venv/bin/qemem`).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
/** The repository's root, from build/test/ of the client. */
const ROOT = resolve(fileURLToPath(import.meta.url), "../../../../..");
const QEMEM = process.env["QEMEM_BIN"] ?? join(ROOT, ".venv", "bin", "qemem");
const ENV = { ...process.env, QEMEM_LLM: "fake", QEMEM_EMBEDDER: "hash" };

export interface Served {
  baseUrl: string;
  /** A key of namespace `default` that may write. */
  key: string;
  /** A read-only key of the same namespace. */
  readOnlyKey: string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

async function createKey(store: string, ...extra: string[]): Promise<string> {
  const args = ["keys", "create", "--store", store, "--namespace", "default", "--json", ...extra];
  const { stdout } = await run(QEMEM, args, { env: ENV });
  const lines = stdout.trim().split("\n");
  return (JSON.parse(lines[lines.length - 1] ?? "{}") as { key: string }).key;
}

async function ready(baseUrl: string, child: ChildProcess, seconds: number): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`qemem serve exited with ${child.exitCode}`);
    }
    try {
      if ((await fetch(`${baseUrl}/readyz`)).ok) {
        return;
      }
    } catch {
      // not listening yet
    }
    await new Promise((done) => setTimeout(done, 100));
  }
  throw new Error(`qemem serve did not get ready within ${seconds} s`);
}

/** A server with an empty store and two keys, ready to answer. */
export async function serve(): Promise<Served> {
  const folder = await mkdtemp(join(tmpdir(), "qemem-ts-"));
  const store = join(folder, "memory.db");
  const key = await createKey(store);
  const readOnlyKey = await createKey(store, "--read-only");
  const port = await freePort();
  const child = spawn(
    QEMEM,
    ["serve", "--store", store, "--port", String(port), "--llm", "fake", "--job-lease", "1"],
    { env: ENV, stdio: "ignore", detached: true },
  );
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.pid !== undefined) {
      const exited = new Promise((done) => child.once("exit", done));
      process.kill(-child.pid, "SIGKILL");
      await exited;
    }
    await rm(folder, { recursive: true, force: true });
  };
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await ready(baseUrl, child, 60);
  } catch (exc) {
    await stop();
    throw exc;
  }
  return { baseUrl, key, readOnlyKey, stop };
}
