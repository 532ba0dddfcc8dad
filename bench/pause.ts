// `npm run bench:pause` (issue 22's benchmark): what the rollout door costs a trainer's
// weight update. Agents keep `--sessions` sessions busy with back-to-back turns against
// the simulated engine (`--engine-ms` per turn); each round the trainer pauses with
// in_flight "drain" (timed until it answers: the in-flight turns finish first), keeps the
// door closed `--update-ms` (the weight update), and resumes. Reported per round: how many
// turns were in flight, the drain time, and for the turns held at the door the latency
// they paid beyond the pause (answer time minus resume time), against a turn's latency
// when nothing is paused. It starts the server in this process (startSessionServer) and
// stops exactly what it started. Prints a table; writes JSON (bench/out/pause.json, or --out).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { performance } from "node:perf_hooks";
import { startSessionServer } from "../index.ts";
import { startSimEngine } from "../server/sim-engine/sim-engine.ts";
import { fmt, summarize, type LatencySummary } from "./rollout-stats.ts";
import { benchArgs } from "./bench-args.ts";
import { resumeCase, type ResumeCase } from "./pause-resume.ts";

const USAGE = `Usage: npm run bench:pause -- [--sessions N] [--rounds N] [--engine-ms N] [--update-ms N] [--workers N] [--out FILE] [--resume-only]

  --sessions N    sessions kept busy (default 64)
  --rounds N      pause/resume rounds (default 10)
  --engine-ms N   simulated generation time per turn (default 200)
  --update-ms N   how long the door stays closed per round, the weight update (default 500)
  --workers N     worker processes (default 2)
  --out FILE      where to write JSON (default bench/out/pause.json)
  --resume-only   only the resume case (bench/pause-resume.ts): an engine abort with
                  --on-engine-abort retry against resume`;

const TURNS_PER_SESSION = 8; // then the agent deletes it and starts a fresh one, as a rollout does

interface Turn {
  start: number;
  end: number;
  status: number;
}

interface Round {
  inFlight: number;
  drainMs: number;
  held: number;
  /** For each held turn: its answer time minus the resume time. */
  beyondPause: LatencySummary;
}

function parse(argv: string[]) {
  const values = benchArgs("bench:pause", USAGE, argv, {
    sessions: { type: "string" },
    rounds: { type: "string" },
    "engine-ms": { type: "string" },
    "update-ms": { type: "string" },
    workers: { type: "string" },
    out: { type: "string" },
    "resume-only": { type: "boolean" },
  });
  const int = (v: string | undefined, d: number) => (v === undefined ? d : Math.max(1, Math.floor(Number(v)) || d));
  return {
    sessions: int(values.sessions, 64),
    rounds: int(values.rounds, 10),
    engineMs: int(values["engine-ms"], 200),
    updateMs: int(values["update-ms"], 500),
    workers: int(values.workers, 2),
    out: values.out ?? "bench/out/pause.json",
    resumeOnly: values["resume-only"] === true,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** The resume case: lost tokens and the latency of an interrupted turn, retry against resume. */
async function resumeCases(args: ReturnType<typeof parse>): Promise<ResumeCase[]> {
  const options = { ...args, abortAt: 8 }; // below the sim reply's 15 tokens: every abort keeps exactly 8
  const cases = [await resumeCase("retry", options), await resumeCase("resume", options)];
  const lines = [
    `| --on-engine-abort | aborted | tokens generated | kept | lost | interrupted turn p50 ms | unpaused turn p50 ms |`,
    `| --- | ---: | ---: | ---: | ---: | ---: | ---: |`,
    ...cases.map(
      (c) =>
        `| ${c.mode} | ${c.aborted} | ${c.generatedTokens} | ${c.keptTokens} | ${c.lostTokens} | ${fmt(c.interrupted.p50)} | ${fmt(c.normal.p50)} |`,
    ),
  ];
  process.stdout.write(
    `\nresume case (interrupted: send to answer minus the door's closed time)\n\n${lines.join("\n")}\n`,
  );
  return cases;
}

async function main(): Promise<void> {
  const args = parse(process.argv.slice(2));
  if (args.resumeOnly) {
    const cases = await resumeCases(args);
    mkdirSync(dirname(args.out), { recursive: true });
    writeFileSync(args.out, `${JSON.stringify({ node: process.version, args, resume: cases }, null, 1)}\n`);
    return;
  }
  const engine = await startSimEngine({ latencyMs: args.engineMs });
  const server = await startSessionServer({ engineUrl: engine.url, workers: args.workers, logLevel: "warn" });
  const turns: Turn[] = [];
  let running = true;

  // One agent: turns back to back on one session, a fresh session every few turns.
  const agent = async (n: number) => {
    while (running) {
      const { sessionId } = await server.createSession();
      const messages: unknown[] = [{ role: "user", content: `Agent ${n}: tell me about the weather.` }];
      for (let k = 0; k < TURNS_PER_SESSION && running; k++) {
        const start = performance.now();
        const res = await post(`${server.url}/sessions/${sessionId}/v1/chat/completions`, { model: "m", messages });
        turns.push({ start, end: performance.now(), status: res.status });
        if (res.status !== 200) throw new Error(`turn failed: ${res.status} ${JSON.stringify(res.json)}`);
        const reply = res.json as { choices: Array<{ message: unknown }> };
        messages.push(reply.choices[0]!.message, { role: "user", content: `And then (${k})?` });
      }
      await fetch(`${server.url}/sessions/${sessionId}`, { method: "DELETE" });
    }
  };

  const rounds: Round[] = [];
  const allBeyond: number[] = [];
  const pauses: Array<{ paused: number; resumed: number }> = [];
  try {
    await server.resume("v0");
    const agents = Array.from({ length: args.sessions }, (_, n) => agent(n));
    await sleep(2 * args.engineMs + 500); // every agent is in its loop
    for (let r = 1; r <= args.rounds; r++) {
      await sleep(args.engineMs * (0.5 + Math.random())); // a random point in the turns' cycle
      const paused = performance.now();
      const outcome = await server.pause({ inFlight: "drain" });
      const drained = performance.now();
      await sleep(args.updateMs);
      const resumedAt = performance.now();
      await server.resume(`v${r}`);
      pauses.push({ paused, resumed: resumedAt });
      // Every held turn is answered within a few engine turns of the resume.
      await sleep(4 * args.engineMs + 200);
      const held = turns.filter((t) => t.start > paused && t.start < resumedAt && t.end > resumedAt);
      allBeyond.push(...held.map((t) => t.end - resumedAt));
      rounds.push({
        inFlight: outcome.drained ?? 0,
        drainMs: drained - paused,
        held: held.length,
        beyondPause: summarize(held.map((t) => t.end - resumedAt)),
      });
      process.stderr.write(`round ${r}: in flight ${outcome.drained}, drain ${fmt(drained - paused)} ms\n`);
    }
    running = false;
    await Promise.all(agents);
  } finally {
    running = false;
    await server.shutdown();
    await engine.close();
  }
  // A turn's latency when no pause overlapped it: the baseline for the held turns.
  const calm = turns.filter((t) => !pauses.some((p) => t.end > p.paused && t.start < p.resumed + 4 * args.engineMs));
  const normal = summarize(calm.map((t) => t.end - t.start));
  const drain = summarize(rounds.map((r) => r.drainMs));
  const beyond = summarize(allBeyond);

  const lines = [
    `| round | in flight | drain ms | held turns | beyond pause p50 ms | p99 ms |`,
    `| ---: | ---: | ---: | ---: | ---: | ---: |`,
    ...rounds.map(
      (r, i) =>
        `| ${i + 1} | ${r.inFlight} | ${fmt(r.drainMs)} | ${r.held} | ${fmt(r.beyondPause.p50)} | ${fmt(r.beyondPause.p99)} |`,
    ),
  ];
  process.stdout.write(
    `\nsessions ${args.sessions}, workers ${args.workers}, engine ${args.engineMs} ms/turn, update ${args.updateMs} ms, ${args.rounds} rounds\n\n` +
      `${lines.join("\n")}\n\n` +
      `drain: p50 ${fmt(drain.p50)} ms, max ${fmt(drain.max)} ms\n` +
      `a held turn, answer minus resume: p50 ${fmt(beyond.p50)} ms, p99 ${fmt(beyond.p99)} ms (${beyond.count} turns)\n` +
      `an unpaused turn, answer minus send: p50 ${fmt(normal.p50)} ms, p99 ${fmt(normal.p99)} ms (${normal.count} turns)\n` +
      `what the door adds to a held turn (p50 - p50): ${fmt(beyond.p50 - normal.p50)} ms\n`,
  );
  const resume = await resumeCases(args);
  mkdirSync(dirname(args.out), { recursive: true });
  writeFileSync(
    args.out,
    `${JSON.stringify({ node: process.version, args, rounds, drain, heldBeyondPause: beyond, normalTurn: normal, resume }, null, 1)}\n`,
  );
}

await main();
