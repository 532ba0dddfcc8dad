// `npm run bench:fork-heap`: what one fork keeps on the V8 heap, measured inside one process
// (a ratio free of the machine's load, next to bench:memory's fork case, issue 43). Starts the
// pre-built simulated engine (as bench:memory), drives a SessionCore over a journal record
// store in a temporary directory in this process: one session of --tokens ids over --turns
// turns, forked --ways ways at its last turn, then one turn per branch, as memory-fork.ts.
// Heap used after a full GC is read before the session, after it, after the forks and after
// the branches' turns; with --snapshot DIR it writes a heap snapshot at each reading.
// Needs `node --expose-gc` (the npm script passes it).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeHeapSnapshot } from "node:v8";
import { createEngine } from "../engine/index.ts";
import { createSessionCore } from "../sessions/index.ts";
import { JournalRecordStore } from "../sessions/journal/journal-store.ts";
import { killStartedOnExit, startEngine } from "./rollout-procs.ts";
import { openingMessage, toolResult } from "./rollout-workload.ts";
import { benchArgs } from "./bench-args.ts";

const USAGE = `Usage: npm run bench:fork-heap -- [flags]

Heap bytes one fork keeps: one session forked W ways in this process, then a turn per branch.

  --ways W          branches (default 64)
  --tokens N        token ids of the forked session (default 32768)
  --turns T         turns of the forked session (default 4)
  --output-tokens N completion tokens of every engine reply (default 32)
  --snapshot DIR    also write a heap snapshot at each reading into DIR
  --help            this text`;

const values = benchArgs("bench:fork-heap", USAGE, process.argv.slice(2), {
  ways: { type: "string" },
  tokens: { type: "string" },
  turns: { type: "string" },
  "output-tokens": { type: "string" },
  snapshot: { type: "string" },
});
const ways = Number(values.ways ?? 64);
const tokens = Number(values.tokens ?? 32768);
const turns = Number(values.turns ?? 4);
const outputTokens = Number(values["output-tokens"] ?? 32);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

const engine = await startEngine(["--prebuilt-tokens", String(outputTokens), "--prebuilt-turns", String(turns)]);
killStartedOnExit();
const dir = mkdtempSync(join(tmpdir(), "tito-fork-heap-"));
const store = await JournalRecordStore.open({ dir, fsync: "never" });
const core = createSessionCore({
  engine: createEngine({
    api: "sglang-chat",
    engineUrl: engine.url,
    pooledReplies: true,
    timeoutMs: 600_000,
    connectTimeoutMs: 10_000,
    routingReplay: false,
    indexerReplay: false,
    dropAuthorization: false,
  }),
  recordStore: store,
});

type Message = { role: string; content: string };
const perTurn = Math.ceil(tokens / turns);

/**
 * A session of `tokens` ids (`seed`: its text) whose history is rebuilt for each request,
 * never kept here: only its replies are, so this process's heap holds no copy of the
 * messages the session core keeps (the server's client is another process).
 */
class Driven {
  readonly replies: string[] = [];
  constructor(readonly seed: number) {}
  history(): Message[] {
    const out: Message[] = [openingMessage(this.seed, perTurn)];
    for (const [k, reply] of this.replies.entries())
      out.push({ role: "assistant", content: reply }, toolResult(this.seed, k + 1, perTurn));
    return out;
  }
  /** The session's turns; returns its ids' count. */
  async run(id: string): Promise<number> {
    let held = 0;
    for (let k = 0; k < turns; k++) {
      const messages = this.history().slice(0, 2 * k + 1);
      const reply = await turn(id, messages);
      held = reply.held;
      this.replies.push(reply.content);
    }
    return held;
  }
}

async function turn(id: string, messages: Message[]): Promise<{ held: number; content: string }> {
  const body = Buffer.from(JSON.stringify({ model: "tito-sim", messages, max_tokens: outputTokens }));
  const res = await core.chat(id, { method: "POST", path: "/v1/chat/completions", query: "", headers: {}, body });
  const bytes = Buffer.concat(Array.isArray(res.body) ? res.body : [res.body as Buffer]);
  if (res.status !== 200) throw new Error(`turn: ${res.status} ${bytes.toString("utf8")}`);
  const reply = JSON.parse(bytes.toString("utf8"));
  return { held: reply.usage.prompt_tokens + reply.usage.completion_tokens, content: reply.choices[0].message.content };
}

async function create(): Promise<string> {
  return JSON.parse(((await core.create()).body as Buffer).toString()).session_id as string;
}

async function forkAll(id: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let w = 0; w < n; w++) {
    const res = await core.fork(id, Buffer.from(JSON.stringify({ at: turns - 1 })));
    if (res.status !== 201) throw new Error(`fork: ${res.status}`);
    out.push(JSON.parse((res.body as Buffer).toString()).session_id);
  }
  return out;
}

/** One turn on each branch: the session's history, then a 64-token tool result of its own. */
async function branchTurns(base: Driven, branches: string[], seed: number): Promise<number> {
  let added = 0;
  for (const [w, branch] of branches.entries()) {
    const messages = [...base.history().slice(0, 2 * turns), toolResult(seed + w, 1, 64)];
    added += (await turn(branch, messages)).held;
  }
  return added;
}

let snapshots = 0;
async function heap(label: string): Promise<number> {
  await new Promise((r) => setTimeout(r, 50));
  for (let i = 0; i < 4; i++) gc!();
  const used = process.memoryUsage();
  if (values.snapshot) writeHeapSnapshot(join(values.snapshot, `${++snapshots}-${label}.heapsnapshot`));
  return used.heapUsed + used.external;
}

try {
  // The warm-up: the whole case in small (2 branches), then deleted, as bench/memory-fork.ts.
  const warm = new Driven(3_000_001);
  const warmId = await create();
  await warm.run(warmId);
  const warmBranches = await forkAll(warmId, 2);
  await branchTurns(warm, warmBranches, 4_000_000);
  for (const id of [...warmBranches, warmId]) await core.delete(id);

  const id = await create();
  const before = await heap("before");
  const base = new Driven(1_000_001);
  const baseTokens = await base.run(id);
  const session = await heap("session");
  const branches = await forkAll(id, ways);
  const forked = await heap("forked");
  const unique = baseTokens + (await branchTurns(base, branches, 2_000_000)) - ways * baseTokens;
  const branched = await heap("branched");
  const result = {
    baseTokens,
    uniqueTokens: unique,
    sessionBytesPerToken: (session - before) / baseTokens,
    forkBytesEach: (forked - session) / ways,
    branchTurnBytesEach: (branched - forked) / ways,
    bytesPerUniqueToken: (branched - before) / unique,
  };
  process.stdout.write(`${JSON.stringify(result, null, 1)}\n`);
} finally {
  await core.close();
  rmSync(dir, { recursive: true, force: true });
  await engine.stop();
}
