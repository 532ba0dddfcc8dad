// The resume case of `npm run bench:pause` (issue 42, partial rollouts): what an engine-side
// abort costs with `--on-engine-abort retry` against `resume`. Per mode, `sessions` turns
// are sent at once to the simulated engine; halfway through their generation the trainer
// pauses tito-server (keep), updates the engine's weights with `abort_all_requests` (every
// turn is aborted at token `abortAt`), keeps the door closed `updateMs` and resumes. A retry
// client sends its 503'd turn again. Reported: the tokens the engine had generated for the
// aborted requests (aborts × abortAt) and how many of them a committed record kept (its
// `resumed` parts), so lost = generated - kept; and the latency of such a turn, first send
// to final answer, minus the door's closed time, against a turn nothing interrupted.
import { performance } from "node:perf_hooks";
import { startSessionServer } from "../index.ts";
import { startSimEngine } from "../server/sim-engine/sim-engine.ts";
import { summarize, type LatencySummary } from "./rollout-stats.ts";

export interface ResumeCase {
  mode: "retry" | "resume";
  aborted: number;
  generatedTokens: number;
  keptTokens: number;
  lostTokens: number;
  /** A turn the update interrupted: send to final answer, minus the door's closed time. */
  interrupted: LatencySummary;
  /** A turn nothing interrupted. */
  normal: LatencySummary;
}

const TOKEN_MS = 40;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const post = (url: string, body: unknown) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

export async function resumeCase(
  mode: "retry" | "resume",
  args: { sessions: number; engineMs: number; updateMs: number; workers: number; abortAt: number },
): Promise<ResumeCase> {
  // Per-token time too, so a continuation (the rest of the tokens) is cheaper than a regeneration.
  const engine = await startSimEngine({ latencyMs: args.engineMs, tokenMs: TOKEN_MS, abortAtToken: args.abortAt });
  const server = await startSessionServer({
    engineUrl: engine.url,
    engineApi: "sglang-generate",
    workers: args.workers,
    logLevel: "warn",
    durability: "memory",
    onEngineAbort: mode,
  });
  const body = { model: "m", max_tokens: 256, messages: [{ role: "user", content: "Tell me about the weather." }] };
  // One turn on a fresh session, sent again while it answers a retryable 503: its latency.
  const turn = async (): Promise<{ ms: number; sessionId: string }> => {
    const { sessionId } = await server.createSession();
    const start = performance.now();
    for (;;) {
      const res = await post(`${server.url}/sessions/${sessionId}/v1/chat/completions`, body);
      if (res.status === 200) {
        await res.arrayBuffer();
        return { ms: performance.now() - start, sessionId };
      }
      const text = await res.text();
      if (res.status !== 503) throw new Error(`turn failed: ${res.status} ${text}`);
      await sleep(20);
    }
  };
  try {
    await server.resume("v0");
    const normal = await Promise.all(Array.from({ length: args.sessions }, turn));
    const interrupted = Array.from({ length: args.sessions }, turn);
    await sleep(args.engineMs / 2);
    const closed = performance.now();
    await server.pause({ inFlight: "keep" });
    await post(`${engine.url}/update_weights_from_disk`, { model_path: "ckpt", abort_all_requests: true });
    await sleep(args.updateMs);
    await server.resume("v1");
    const closedMs = performance.now() - closed;
    const done = await Promise.all(interrupted);
    let kept = 0;
    for (const { sessionId } of done) {
      const got = (await (await fetch(`${server.url}/sessions/${sessionId}`)).json()) as {
        records: Array<{ resumed?: Array<{ completion_ids: number[] }> }>;
      };
      for (const r of got.records) for (const p of r.resumed ?? []) kept += p.completion_ids.length;
    }
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const aborted = [...metrics.matchAll(/^tito_engine_aborts_total\{[^}]*\} (\d+)/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
    const generated = aborted * args.abortAt;
    return {
      mode,
      aborted,
      generatedTokens: generated,
      keptTokens: kept,
      lostTokens: generated - kept,
      interrupted: summarize(done.map((d) => d.ms - closedMs)),
      normal: summarize(normal.map((d) => d.ms)),
    };
  } finally {
    await server.shutdown();
    await engine.close();
  }
}
