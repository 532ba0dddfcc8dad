// The rollout workload, as a client: each session is create -> T chat turns with a
// growing history -> optional full-records GET -> delete, and all sessions run at once.
// The same code drives the session server and the engine alone (the floor); a Target
// says which routes exist. It measures from the client side only (latencies, bytes) and
// never looks inside a server process. Every loop has a fixed count.
import { performance } from "node:perf_hooks";
import { Pool } from "undici";

export interface WorkloadShape {
  sessions: number;
  turns: number;
  inputTokens: number;
  outputTokens: number;
  getRecords: boolean;
  /** Expected routing-replay bytes (base64) summed over a session's turns; 0 = none. */
  r3BytesPerSession: number;
}

export interface WorkloadResult {
  wallMs: number;
  turns: number;
  chatMs: number[];
  recordsGetMs: number[];
  recordsGetBytes: number[];
  clientCpuMs: number;
  /** The shard of each session (x-tito-shard of its create); empty for the floor. */
  shards: number[];
}

type Message = { role: string; content: string };

// Each word is one Qwen3 token after a space (checked with the bundled tokenizer), so a
// text of n words is about n tokens without the client loading a tokenizer.
const WORDS = (
  "time year people way day man thing woman life child world school state family student group " +
  "country problem hand part place case week company system program question work government number night point " +
  "home water room mother area money story fact month lot right study book eye job word business issue side"
).split(" ");

export function text(tokens: number, seed: number): string {
  const out: string[] = [];
  for (let i = 0; i < tokens; i++) out.push(WORDS[(seed * 7919 + i * 31 + (i >> 3)) % WORDS.length]);
  return out.join(" ");
}

/** A session's first message: its seed, then `tokens` words (the same for every benchmark's small turns). */
export function openingMessage(seed: number, tokens: number): Message {
  return { role: "user", content: `Session ${seed}.${text(tokens, seed)}` };
}

/** The tool result a session sends before turn k > 0: `tokens` words of its own. */
export function toolResult(seed: number, k: number, tokens: number): Message {
  return { role: "tool", content: `Result ${k}:${text(tokens, seed * 1000 + k)}` };
}

/** Where the workload's requests go: the session server, or the engine alone. */
export class Target {
  readonly name: string;
  readonly sessions: boolean;
  readonly #pool: Pool;

  constructor(name: string, url: string, opts: { sessions: boolean; connections: number }) {
    this.name = name;
    this.sessions = opts.sessions;
    this.#pool = new Pool(url, {
      connections: opts.connections,
      keepAliveTimeout: 60_000,
      headersTimeout: 600_000,
      bodyTimeout: 600_000,
    });
  }

  /**
   * One request through the pool's dispatch API: chunks are handled as they arrive, with no
   * body stream or async iterator (undici's request() builds both; on an 88 MiB records GET
   * the client spent as much CPU iterating that stream as the server spent serving it, on
   * the same two cores). `discard`: count the reply's bytes but keep only its first chunk.
   */
  request(
    method: "GET" | "POST" | "DELETE",
    path: string,
    body?: string,
    discard = false,
  ): Promise<{
    status: number;
    chunks: Buffer[];
    bytes: number;
    headers: Record<string, string | string[] | undefined>;
  }> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      let status = 0;
      let headers: Record<string, string | string[] | undefined> = {};
      this.#pool.dispatch(
        { method, path, body, headers: body === undefined ? undefined : { "content-type": "application/json" } },
        {
          // Its presence selects undici's controller-style handler API.
          onRequestStart() {},
          onResponseStart(_c, statusCode, responseHeaders) {
            if (statusCode < 200) return;
            status = statusCode;
            headers = responseHeaders;
          },
          onResponseData(_c, chunk) {
            if (!discard || chunks.length === 0) chunks.push(chunk);
            bytes += chunk.length;
          },
          onResponseEnd() {
            resolve({ status, chunks, bytes, headers });
          },
          onResponseError(_c, err) {
            reject(err);
          },
        },
      );
    });
  }

  async create(): Promise<string> {
    return (await this.createOnShard()).id;
  }

  /** Creates a session and says which shard owns it (the `x-tito-shard` header). */
  async createOnShard(): Promise<{ id: string; shard: number }> {
    if (!this.sessions) return { id: "", shard: 0 };
    const res = await this.request("POST", "/sessions", "{}");
    expectStatus(res, 200, "POST /sessions");
    const id = JSON.parse(Buffer.concat(res.chunks).toString("utf8")).session_id as string;
    return { id, shard: Number(res.headers["x-tito-shard"] ?? 0) };
  }

  chatPath(id: string): string {
    return this.sessions ? `/sessions/${id}/v1/chat/completions` : "/v1/chat/completions";
  }

  async delete(id: string): Promise<void> {
    if (!this.sessions) return;
    const res = await this.request("DELETE", `/sessions/${id}`);
    expectStatus(res, 204, `DELETE /sessions/${id}`);
  }

  close(): Promise<void> {
    return this.#pool.close();
  }
}

function expectStatus(res: { status: number; chunks: Buffer[] }, want: number, what: string): void {
  if (res.status === want) return;
  const head = Buffer.concat(res.chunks).subarray(0, 500).toString("utf8");
  throw new Error(`${what}: status ${res.status}, want ${want}: ${head}`);
}

const MESSAGE_KEY = Buffer.from('"message":');
const HEAD_LIMIT = 1 << 20;

/**
 * choices[0].message of a reply without parsing the whole body: the engine writes it
 * before meta_info, and a floor reply carries the full routing-replay payload, which a
 * JSON.parse in the client would charge to the floor. Falls back to JSON.parse.
 */
export function replyMessage(chunks: Buffer[]): Message {
  let head: Buffer = chunks[0] ?? Buffer.alloc(0);
  for (let i = 1; i < chunks.length && head.length < HEAD_LIMIT && head.indexOf(MESSAGE_KEY) < 0; i++)
    head = Buffer.concat([head, chunks[i]]);
  const at = head.indexOf(MESSAGE_KEY);
  if (at >= 0) {
    let i = at + MESSAGE_KEY.length;
    while (head[i] === 0x20) i++;
    let depth = 0;
    let inString = false;
    for (let j = i; j < head.length; j++) {
      const c = head[j];
      if (inString) {
        if (c === 0x5c) j++;
        else if (c === 0x22) inString = false;
      } else if (c === 0x22) inString = true;
      else if (c === 0x7b) depth++;
      else if (c === 0x7d && --depth === 0) return JSON.parse(head.toString("utf8", i, j + 1)) as Message;
    }
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8")).choices[0].message as Message;
}

export interface RunHooks {
  onTurn?: () => void;
}

async function runSession(
  target: Target,
  shape: WorkloadShape,
  seed: number,
  out: WorkloadResult,
  hooks: RunHooks,
  created?: string,
): Promise<void> {
  let id = created;
  if (id === undefined) {
    const made = await target.createOnShard();
    id = made.id;
    if (target.sessions) out.shards.push(made.shard);
  }
  const messages: Message[] = [openingMessage(seed, shape.inputTokens)];
  for (let k = 0; k < shape.turns; k++) {
    // Turn k sends 2k+1 messages: the first user message, then (assistant, tool) pairs.
    if (k > 0) messages.push(toolResult(seed, k, shape.inputTokens));
    const body = JSON.stringify({ model: "tito-sim", messages, max_tokens: shape.outputTokens });
    const t0 = performance.now();
    const res = await target.request("POST", target.chatPath(id), body);
    expectStatus(res, 200, `chat turn ${k} of session ${seed}`);
    const reply = replyMessage(res.chunks);
    out.chatMs.push(performance.now() - t0);
    if (reply.role !== "assistant" || typeof reply.content !== "string")
      throw new Error(`turn ${k}: unexpected message ${JSON.stringify(reply).slice(0, 200)}`);
    messages.push({ role: "assistant", content: reply.content });
    out.turns++;
    hooks.onTurn?.();
  }
  if (shape.getRecords && target.sessions) {
    const t0 = performance.now();
    const res = await target.request("GET", `/sessions/${id}`, undefined, true);
    out.recordsGetMs.push(performance.now() - t0);
    expectStatus(res, 200, `GET /sessions/${id}`);
    // The records must hold the routing-replay payloads the client never saw.
    if (res.bytes < shape.r3BytesPerSession)
      throw new Error(
        `records GET of ${res.bytes} bytes is smaller than the ${shape.r3BytesPerSession} routing-replay bytes sent`,
      );
    out.recordsGetBytes.push(res.bytes);
  }
  await target.delete(id);
}

/** Runs `shape.sessions` sessions concurrently, `seedBase` keeping their texts distinct. */
function emptyResult(): WorkloadResult {
  return { wallMs: 0, turns: 0, chatMs: [], recordsGetMs: [], recordsGetBytes: [], clientCpuMs: 0, shards: [] };
}

export async function runWorkload(
  target: Target,
  shape: WorkloadShape,
  seedBase: number,
  hooks: RunHooks = {},
): Promise<WorkloadResult> {
  const out = emptyResult();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: shape.sessions }, (_, s) => runSession(target, shape, seedBase + s, out, hooks)),
  );
  out.wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  out.clientCpuMs = (cpu.user + cpu.system) / 1000;
  return out;
}

/**
 * `passes` passes of the workload one after another, as one result (seeds distinct per
 * pass). A small pass is over in ~0.15 s, less than the time between two full GCs of a
 * process (~2 s for the router), so one pass measured either caught a GC or did not, and
 * a run's CPU per turn came out bimodal; over several passes the GCs are counted at the
 * rate they happen.
 */
export async function runPasses(
  target: Target,
  shape: WorkloadShape,
  passes: number,
  hooks: RunHooks = {},
): Promise<WorkloadResult> {
  const out = emptyResult();
  for (let p = 0; p < passes; p++) {
    const one = await runWorkload(target, shape, p * shape.sessions, hooks);
    out.wallMs += one.wallMs;
    out.turns += one.turns;
    out.clientCpuMs += one.clientCpuMs;
    for (const key of ["chatMs", "recordsGetMs", "recordsGetBytes", "shards"] as const) out[key].push(...one[key]);
  }
  return out;
}

/**
 * Warm-up, not measured: `passes` full passes of the workload (all sessions, all turns,
 * no records GET), each with at least two sessions on every shard. Each worker process
 * JIT-compiles the tokenizer and template code and fills the tokenizer's caches on its
 * own; measured here, a few turns per worker left the first measured pass up to 2x
 * slower than the second. Sessions land on shards by a hash of their id, so it creates
 * until every shard has two, within a fixed number of attempts.
 */
export async function warmUp(target: Target, shape: WorkloadShape, shards: number, passes = 1): Promise<void> {
  for (let p = 0; p < passes; p++) await warmUpPass(target, shape, shards);
}

async function warmUpPass(target: Target, shape: WorkloadShape, shards: number): Promise<void> {
  const pass: WorkloadShape = { ...shape, getRecords: false };
  if (!target.sessions) {
    await runWorkload(target, pass, 900_000);
    return;
  }
  const perShard = new Array<number>(Math.max(1, shards)).fill(0);
  const ids: string[] = [];
  const enough = () => ids.length >= shape.sessions && perShard.every((n) => n >= 2);
  for (let attempt = 0; attempt < 32 * perShard.length + shape.sessions && !enough(); attempt++) {
    const { id, shard } = await target.createOnShard();
    if (ids.length < shape.sessions || perShard[shard] < 2) {
      perShard[shard]++;
      ids.push(id);
    } else {
      await target.delete(id);
    }
  }
  const out = emptyResult();
  await Promise.all(ids.map((id, i) => runSession(target, pass, 900_000 + i, out, {}, id)));
}
