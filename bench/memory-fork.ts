// The fork case of `npm run bench:memory` (issue 43): one session of about --fork-tokens
// token ids (its turns' tool outputs sized to reach them), forked --fork-ways ways at its
// last turn (POST /sessions/{id}/fork), then one more turn on each branch. Reads the
// owning worker's memory (GET /metrics?gc=1, as memory.ts) before the session, after it,
// after the forks and after the branches' turns: what the forks alone add (target < 1 MiB:
// the ids are shared copy-on-write), and the growth over the first reading per unique
// token held (the session's ids once, plus what each branch added; target <= 16 B): as heap
// + external, and as what is held, less what compiled code and bytecode grew meanwhile
// (what the worker has run, not what it holds: V8 compiles bytecode when a function first
// runs and flushes it after a few GCs unused, 50-250 KiB either way from run to run; exact
// heap snapshots of the worker agree with "held" to ~1 B per token). A warm-up runs the
// case once first, on the same shard (warmUp).
import type { Target } from "./rollout-workload.ts";
import { openingMessage, toolResult } from "./rollout-workload.ts";

export interface ForkCaseConfig {
  ways: number;
  tokens: number;
  turns: number;
  outputTokens: number;
}

interface Reading {
  rss: number;
  heapUsed: number;
  external: number;
  /** Compiled code: part of heapUsed (worker-metrics.ts, nodejs_heap_code_used_bytes). */
  heapCode: number;
  /** Compiled code and bytecode with their metadata: part of heapUsed (nodejs_heap_compiled_bytes). */
  compiled: number;
}

export interface ForkCaseResult {
  shard: number;
  baseTokens: number;
  uniqueTokens: number;
  readings: { before: Reading; session: Reading; forked: Reading; branched: Reading };
  /** What the forks added before the branches' own turns, bytes. */
  forkRss: number;
  forkHeapPlusExternal: number;
  /** Growth over `before` per unique token held, after the branches' turns. */
  rssPerUniqueToken: number;
  heapPlusExternalPerUniqueToken: number;
  /** As heapPlusExternalPerUniqueToken, less what the code spaces grew (the JIT's, not what is held). */
  dataPerUniqueToken: number;
  /** How much the code spaces grew over the case, bytes. */
  codeGrowth: number;
  /** How much compiled code and bytecode grew over the case, bytes (negative: flushed). */
  compiledGrowth: number;
  /** What the forks added before the branches' turns, less code and bytecode, bytes. */
  forkHeld: number;
  /** Heap + external less code and bytecode growth per unique token held: what the worker holds. */
  heldPerUniqueToken: number;
}

type Message = { role: string; content: string };

async function turn(target: Target, id: string, messages: Message[], maxTokens: number): Promise<number> {
  const body = JSON.stringify({ model: "tito-sim", messages, max_tokens: maxTokens });
  const res = await target.request("POST", target.chatPath(id), body);
  const reply = JSON.parse(Buffer.concat(res.chunks).toString("utf8"));
  if (res.status !== 200) throw new Error(`fork case turn: ${res.status} ${JSON.stringify(reply)}`);
  messages.push({ role: "assistant", content: reply.choices[0].message.content });
  return reply.usage.prompt_tokens + reply.usage.completion_tokens;
}

/** The session of --fork-tokens ids over --turns turns (`seed`: its text); its messages and its ids' count. */
async function baseSession(target: Target, id: string, config: ForkCaseConfig, seed: number) {
  const perTurn = Math.ceil(config.tokens / config.turns);
  const messages: Message[] = [openingMessage(seed, perTurn)];
  let tokens = 0;
  for (let k = 0; k < config.turns; k++) {
    if (k > 0) messages.push(toolResult(seed, k, perTurn));
    tokens = await turn(target, id, messages, config.outputTokens);
  }
  return { messages, tokens };
}

async function forks(target: Target, id: string, ways: number, at: number): Promise<string[]> {
  const branches: string[] = [];
  for (let w = 0; w < ways; w++) {
    const res = await target.request("POST", `/sessions/${id}/fork`, JSON.stringify({ at }));
    const body = JSON.parse(Buffer.concat(res.chunks).toString("utf8"));
    if (res.status !== 201) throw new Error(`fork ${w}: ${res.status} ${JSON.stringify(body)}`);
    branches.push(body.session_id);
  }
  return branches;
}

/**
 * Before the first reading, the whole case once on the same shard, then deleted: what such
 * a case makes the process keep for good whatever it holds is there before the reading, as
 * bench:memory's warm-up does for its sessions: the JIT's code for forks and branch turns
 * (the heap's code space counts in heapUsed; a worker's heap snapshot showed ~380 KiB of
 * new code over 64 forks without it) and the high-water mark of ids-text.ts's scratch
 * bytes, sized by the longest prompt so far (~390 KiB for a 33k-id prompt). Without it the
 * case charged those to the tokens held, about 18 B per unique token.
 */
async function warmUp(target: Target, shard: number, config: ForkCaseConfig): Promise<void> {
  let made = await target.createOnShard();
  for (let tries = 0; made.shard !== shard; tries++) {
    await target.delete(made.id);
    if (tries > 64) throw new Error(`fork case: no session of the warm-up landed on shard-${shard}`);
    made = await target.createOnShard();
  }
  const { messages } = await baseSession(target, made.id, config, 3_000_001);
  const branches = await forks(target, made.id, config.ways, config.turns - 1);
  for (const [w, branch] of branches.entries())
    await turn(target, branch, [...messages, toolResult(4_000_000 + w, 1, 64)], config.outputTokens);
  for (const branch of [...branches, made.id]) await target.delete(branch);
}

export async function forkCase(
  target: Target,
  config: ForkCaseConfig,
  read: (shard: number) => Promise<Reading>,
): Promise<ForkCaseResult> {
  const { id, shard } = await target.createOnShard();
  await warmUp(target, shard, config);
  const before = await read(shard);
  const { messages, tokens: baseTokens } = await baseSession(target, id, config, 1_000_001);
  const session = await read(shard);
  const branches = await forks(target, id, config.ways, config.turns - 1);
  const forked = await read(shard);
  let uniqueTokens = baseTokens;
  for (const [w, branch] of branches.entries()) {
    const history = [...messages, toolResult(2_000_000 + w, 1, 64)];
    uniqueTokens += (await turn(target, branch, history, config.outputTokens)) - baseTokens;
  }
  const branched = await read(shard);
  for (const branch of [...branches, id]) await target.delete(branch);
  const grown = (r: Reading) => r.heapUsed + r.external - before.heapUsed - before.external;
  const codeGrowth = branched.heapCode - before.heapCode;
  const compiledGrowth = branched.compiled - before.compiled;
  return {
    shard,
    baseTokens,
    uniqueTokens,
    readings: { before, session, forked, branched },
    forkRss: forked.rss - session.rss,
    forkHeapPlusExternal: grown(forked) - grown(session),
    rssPerUniqueToken: (branched.rss - before.rss) / uniqueTokens,
    heapPlusExternalPerUniqueToken: grown(branched) / uniqueTokens,
    dataPerUniqueToken: (grown(branched) - codeGrowth) / uniqueTokens,
    codeGrowth,
    compiledGrowth,
    forkHeld: grown(forked) - grown(session) - (forked.compiled - session.compiled),
    heldPerUniqueToken: (grown(branched) - compiledGrowth) / uniqueTokens,
  };
}
