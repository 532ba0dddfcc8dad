// POST /sessions/{id}/samples through the real tree (router + 2 workers as child
// processes), server.samples() on the embedding handle, and examples/rollout.ts run as
// a child process with a worker killed mid-run.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SamplesRequestError, startSessionServer, type SessionServer } from "../../index.ts";
import { shardOf } from "../../server/shard-protocol.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { SampleBody, SessionBody } from "../helpers/bodies.ts";
import { call, newSession, toolLoop } from "../helpers/server.ts";
import { readSafetensors } from "../helpers/safetensors.ts";

const EXAMPLE = fileURLToPath(new URL("../../examples/rollout.ts", import.meta.url));
let engine: SimEngine;
let server: SessionServer;
let dir: string;

test.before(async () => {
  engine = await startSimEngine();
  server = await startSessionServer({ engineUrl: engine.url, workers: 2, logLevel: "warn" });
  dir = mkdtempSync(join(tmpdir(), "tito-samples-test-"));
});

test.after(async () => {
  await server?.shutdown();
  await engine?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the route answers from the owning shard: JSON, safetensors by Accept or ?format=, 400 and 404", async () => {
  const id = await newSession(server.url);
  const { messages } = await toolLoop(server.url, id);
  const got = await call<SessionBody>(server.url, "GET", `/sessions/${id}`);
  const res = await call<SampleBody>(server.url, "POST", `/sessions/${id}/samples`);
  assert.is(res.status, 200, res.text);
  assert.is(res.headers.get("x-tito-shard"), String(shardOf(id, 2)));
  assert.match(res.headers.get("content-type")!, "application/json");
  const s = res.json;
  assert.equal(s.tokens, got.json.metadata.accumulated_token_ids);
  assert.is(s.turns.length, messages.filter((m) => m.role === "assistant").length);
  assert.is(s.loss_mask.length, s.response_length);
  assert.is(
    s.loss_mask.reduce((a: number, b: number) => a + b, 0),
    got.json.records.reduce((n, r) => n + r.response.choices[0].meta_info.completion_tokens, 0),
  );

  for (const [path, headers] of [
    [`/sessions/${id}/samples`, { accept: "application/octet-stream" }],
    [`/sessions/${id}/samples?format=safetensors`, {}],
  ] as const) {
    const raw = await fetch(server.url + path, { method: "POST", headers, body: JSON.stringify({ max_seq_len: 40 }) });
    assert.is(raw.status, 200);
    assert.is(raw.headers.get("content-type"), "application/octet-stream");
    const { tensors, metadata } = readSafetensors(Buffer.from(await raw.arrayBuffer()));
    assert.equal(tensors.tokens!.values, s.tokens.slice(0, 40));
    assert.is(metadata.status, "truncated");
  }

  const bad = await call(server.url, "POST", `/sessions/${id}/samples`, { max_seq_len: -1 });
  assert.equal(
    [bad.status, bad.json],
    [400, { error: "max_seq_len must be a positive integer, got -1", code: "TITO_ERR_INVALID_SAMPLE_REQUEST" }],
  );
  const unknown = await call(server.url, "POST", "/sessions/0123456789abcdef0123456789abcdef/samples");
  assert.equal(
    [unknown.status, unknown.json],
    [
      404,
      { error: "session not found: session_id=0123456789abcdef0123456789abcdef", code: "TITO_ERR_SESSION_NOT_FOUND" },
    ],
  );
  // Other methods on /samples are proxied to the engine, as documented.
  assert.is((await call(server.url, "GET", `/sessions/${id}/samples`)).status, 404);

  // The embedding handle: the same JSON, and a coded error with the route's status.
  assert.equal(await server.samples(id), s);
  assert.equal((await server.samples(id, { maxSeqLen: 40 })).tokens, s.tokens.slice(0, 40));
  try {
    await server.samples("no-such-session");
    assert.unreachable("samples of an unknown session must reject");
  } catch (err) {
    assert.instance(err, SamplesRequestError);
    assert.equal(
      [(err as SamplesRequestError).status, (err as SamplesRequestError).code],
      [404, "TITO_ERR_SAMPLES_REQUEST"],
    );
    assert.match((err as Error).message, "session not found: session_id=no-such-session");
  }
});

/** Runs examples/rollout.ts to completion as a child process. */
function runExample(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, ["--import", "tsx", EXAMPLE, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d) => (stdout += d));
  proc.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, stdout, stderr })));
}

test("examples/rollout.ts: K agents, a worker killed mid-run, every session sampled or reported", async () => {
  const out = join(dir, "samples.jsonl");
  const K = 3;
  const run = await runExample([
    "--agents",
    String(K),
    "--workers",
    "2",
    "--cities",
    "2",
    "--kill-worker-after",
    "2",
    "--out",
    out,
  ]);
  assert.is(run.code, 0, run.stdout + run.stderr);
  const killed = /^killing worker of shard (\d+) \(pid \d+\) after 2 generation steps$/m.exec(run.stdout);
  assert.ok(killed, run.stdout);
  const summary =
    /^sessions (\d+), samples (\d+) \(truncated 0\), lost (\d+), retried (\d+), turns (\d+), tokens (\d+), generated tokens (\d+)$/m.exec(
      run.stdout,
    );
  assert.ok(summary, run.stdout);
  const [sessions, samples, lost, retried, turns, tokens, generated] = summary!.slice(1).map(Number) as number[];
  assert.is(sessions, K);
  assert.is(samples! + lost!, K);
  // The killed shard owned at least one live episode: each is named, lost or survived.
  const reported = run.stdout
    .split("\n")
    .filter((l) => /^(lost|survived): agent \d+ session [0-9a-f]{32} shard \d+/.test(l));
  assert.ok(reported.length >= 1, run.stdout);
  assert.is(reported.filter((l) => l.startsWith("lost:")).length, lost);
  for (const line of reported) assert.match(line, `shard ${killed![1]} (its worker restarted)`);
  // A turn at the dead worker got a 503 and was sent again once, and says so.
  assert.is(run.stdout.split("\n").filter((l) => l.startsWith("retrying a turn of agent ")).length, retried);

  const lines = readFileSync(out, "utf8")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as SampleBody);
  assert.is(lines.length, samples);
  for (const s of lines) {
    // Two cities, each a tool call then an answer: four turns, all complete.
    assert.is(s.status, "completed");
    assert.is(s.turns.length, 4);
    assert.equal(
      s.turns.map((t) => t.finish_reason),
      ["tool_calls", "stop", "tool_calls", "stop"],
    );
    assert.is(s.loss_mask.length, s.response_length);
    assert.is(s.rollout_log_probs.length, s.response_length);
  }
  assert.is(
    lines.reduce((n, s) => n + s.turns.length, 0),
    turns,
  );
  assert.is(
    lines.reduce((n, s) => n + s.tokens.length, 0),
    tokens,
  );
  assert.is(
    lines.reduce((n, s) => n + s.loss_mask.reduce((a: number, b: number) => a + b, 0), 0),
    generated,
  );
});

test.run();
