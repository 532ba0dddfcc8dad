// examples/rollout.ts run as a child process (its own tree of real processes) with a
// worker killed mid-run: every session is sampled or reported lost, and the samples hold.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { SampleBody } from "../helpers/bodies.ts";
import { TS_LOADER } from "../helpers/ts-loader.ts";

const EXAMPLE = fileURLToPath(new URL("../../examples/rollout.ts", import.meta.url));
let dir: string;

test.before(() => {
  dir = mkdtempSync(join(tmpdir(), "tito-samples-test-"));
});

test.after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Runs examples/rollout.ts to completion as a child process. */
function runExample(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [...TS_LOADER, EXAMPLE, ...args], { stdio: ["ignore", "pipe", "pipe"] });
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
