// `npm run soak -- --minutes N`: a steady rollout against a `tito-server serve` child (the
// journal, the default durability) for N minutes — agents run tool-loop sessions, GET
// each one's records (checked against the turns the agent saw answered) and DELETE it —
// while the last worker is killed with SIGKILL at a fixed period. Every process's RSS and
// open fds are sampled throughout (soak-sampler.ts). Writes a JSON and an SVG chart next
// to it, prints a table, and exits 1 when a process's memory or fds keep growing after
// warm-up (the first half of the run) beyond the thresholds below, or when any request
// failed. It stops exactly the processes it started.
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { killStartedOnExit, REPO_ROOT, startEngine, startServer, stopServer } from "./rollout-procs.ts";
import { soakChartSvg } from "./soak-chart.ts";
import { judge, SoakSampler, type Thresholds } from "./soak-sampler.ts";
import { RetryingClient, toolLoopSession } from "../test/helpers/retrying-agent.ts";

// A leak of 1 KiB per turn at this workload's rate (about 100 turns/s on 2 cores) is
// ~350 MiB/h, and one fd per session thousands per hour; a GC floor that still settles
// moves by a few MiB over a run, the fds of a flat process by a few connections.
const THRESHOLDS: Thresholds = { rssMiBPerHour: 30, rssMinRiseMiB: 4, fdsPerHour: 30, fdsMinRise: 4 };

const HELP = `Usage: npm run soak -- [options]

  --minutes N        run time (default 20); the first half is warm-up
  --workers N        worker processes (default 2); the last one is killed periodically
  --agents N         concurrent agents (default 8)
  --turns N          chat turns per session (default 8)
  --kill-every-s N   SIGKILL the last worker every N seconds (default 60; 0 = never)
  --sample-s N       sampling period (default 5)
  --latency-ms N     simulated generation time (default 20)
  --out FILE         results JSON (default bench/out/soak-<time>.json; the chart beside it)
`;

function options() {
  const { values } = parseArgs({
    options: {
      minutes: { type: "string", default: "20" },
      workers: { type: "string", default: "2" },
      agents: { type: "string", default: "8" },
      turns: { type: "string", default: "8" },
      "kill-every-s": { type: "string", default: "60" },
      "sample-s": { type: "string", default: "5" },
      "latency-ms": { type: "string", default: "20" },
      out: { type: "string" },
      help: { type: "boolean" },
    },
  });
  if (values.help) {
    process.stdout.write(HELP);
    process.exit(0);
  }
  const num = (name: keyof typeof values, min: number) => {
    const n = Number(values[name]);
    if (!Number.isFinite(n) || n < min) {
      process.stderr.write(`soak: --${name} must be a number >= ${min}\n\n${HELP}`);
      process.exit(2);
    }
    return n;
  };
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  return {
    minutes: num("minutes", 0.1),
    workers: Math.round(num("workers", 1)),
    agents: Math.round(num("agents", 1)),
    turns: Math.round(num("turns", 1)),
    killEveryS: num("kill-every-s", 0),
    sampleS: num("sample-s", 0.5),
    latencyMs: num("latency-ms", 0),
    out: values.out ?? join(REPO_ROOT, "bench", "out", `soak-${stamp}.json`),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function treePids(url: string): Promise<{ router: number | null; shards: (number | null)[] }> {
  const tree = (await (await fetch(`${url}/supervision`)).json()) as {
    router: { pid: number | null };
    shards: { pid: number | null }[];
  };
  return { router: tree.router.pid, shards: tree.shards.map((s) => s.pid) };
}

async function main(): Promise<void> {
  const config = options();
  killStartedOnExit();
  const engine = await startEngine(["--latency-ms", String(config.latencyMs)]);
  const server = await startServer(config.workers, engine.url, [
    "--allowed-append-roles",
    "tool,user",
    "--max-restarts",
    "1000000",
  ]);
  const durationS = config.minutes * 60;
  const warmupS = durationS / 2;
  const t0 = Date.now();
  const elapsedS = () => (Date.now() - t0) / 1000;
  const done = () => elapsedS() >= durationS;
  const sampler = new SoakSampler();
  const client = new RetryingClient(server.url, { timeoutMs: 15_000 });
  const counts = { sessions: 0, exact: 0, mismatched: [] as string[], kills: 0, deletes: 0 };
  const childPids = new Set<number>();

  const sampling = (async () => {
    while (!done()) {
      try {
        const tree = await treePids(server.url);
        const pids: Record<string, number | null> = { host: server.pid, router: tree.router, engine: engine.pid };
        tree.shards.forEach((pid, i) => (pids[`shard-${i}`] = pid));
        for (const pid of [tree.router, ...tree.shards]) if (pid) childPids.add(pid);
        sampler.sample(elapsedS(), pids);
      } catch {
        // the router is never killed here; a sample missed under load is only a gap
      }
      await sleep(config.sampleS * 1000);
    }
  })();
  const killing = (async () => {
    if (config.killEveryS <= 0) return;
    while (elapsedS() + config.killEveryS < durationS) {
      await sleep(config.killEveryS * 1000);
      const pid = (await treePids(server.url)).shards[config.workers - 1];
      if (!pid) continue;
      process.kill(pid, "SIGKILL");
      counts.kills++;
    }
  })();
  const agent = async (a: number) => {
    for (let s = 0; !done(); s++) {
      const id = randomBytes(16).toString("hex");
      await client.create(id);
      const answered = await toolLoopSession(client, id, config.turns, a * 100_000 + s, done);
      counts.sessions++;
      const recorded = await client.recordIds(id);
      if (JSON.stringify(recorded) === JSON.stringify(answered)) counts.exact++;
      else counts.mismatched.push(id);
      await client.delete(id);
      counts.deletes++;
    }
  };
  const loadAtStart = loadavg();
  process.stderr.write(
    `soak: ${config.minutes} min, ${config.workers} workers, ${config.agents} agents; server ${server.url}\n`,
  );
  const progress = setInterval(
    () =>
      process.stderr.write(
        `soak: ${(elapsedS() / 60).toFixed(1)} min, ${client.stats.turns} turns, ${counts.kills} kills, ${client.stats.unexpected.length} failures\n`,
      ),
    60_000,
  );
  try {
    await Promise.all([sampling, killing, ...Array.from({ length: config.agents }, (_, a) => agent(a))]);
  } finally {
    clearInterval(progress);
  }
  const problems = await stopServer(server, [...childPids]);
  await engine.stop();

  const verdicts = judge(sampler, warmupS, THRESHOLDS);
  const failures = [...client.stats.unexpected, ...counts.mismatched.map((id) => `session ${id}: records != answered`)];
  const rows = verdicts.map(
    (v) =>
      `| ${v.role} | ${v.basis} | ${v.incarnations} | ${v.rssFirstMiB.toFixed(1)} → ${v.rssLastMiB.toFixed(1)} | ${v.rssMiBPerHour.toFixed(1)} (${v.lateRssMiBPerHour.toFixed(1)}) | ${v.fdsFirst} → ${v.fdsLast} | ${v.fdsPerHour.toFixed(1)} (${v.lateFdsPerHour.toFixed(1)}) | ${v.judged ? (v.pass ? "ok" : "GROWS") : "not judged"} |`,
  );
  process.stdout.write(
    [
      `soak: ${config.minutes} min, ${client.stats.turns} turns in ${counts.sessions} sessions (${counts.exact} exact), ${counts.deletes} deletes, ${counts.kills} worker kills, ${failures.length} failures`,
      `growth after warm-up (the second half) fails when it goes on over its last half too: RSS > ${THRESHOLDS.rssMiBPerHour} MiB/h and > ${THRESHOLDS.rssMinRiseMiB} MiB over the window (per-minute floors), fds > ${THRESHOLDS.fdsPerHour}/h and > ${THRESHOLDS.fdsMinRise} (per-minute medians); a killed worker by its values at the end of each life`,
      "",
      "| process | basis | pids | RSS MiB (post-warm-up first → last) | RSS MiB/h (late) | fds | fds/h (late) | verdict |",
      "| --- | --- | --- | --- | --- | --- | --- | --- |",
      ...rows,
      "",
    ].join("\n"),
  );
  const machine = { node: process.version, cpus: cpus().length, loadavgAtStart: loadAtStart, loadavgAtEnd: loadavg() };
  mkdirSync(dirname(config.out), { recursive: true });
  const series = Object.fromEntries(sampler.series);
  writeFileSync(
    config.out,
    `${JSON.stringify({ config, thresholds: THRESHOLDS, machine, counts, stats: client.stats, problems, verdicts, series }, null, 1)}\n`,
  );
  const svg = config.out.replace(/\.json$/i, "") + ".svg";
  const subtitle = `${config.minutes} min, ${config.workers} workers (shard-${config.workers - 1} killed every ${config.killEveryS} s), ${config.agents} agents x ${config.turns} turns, ${client.stats.turns} turns, load ${loadAtStart.map((l) => l.toFixed(2)).join(" ")}`;
  writeFileSync(svg, soakChartSvg("tito-server soak", subtitle, sampler.series, verdicts, elapsedS(), warmupS));
  process.stdout.write(`results: ${config.out}\nchart: ${svg}\n`);
  for (const p of [...problems, ...failures.slice(0, 20)]) process.stdout.write(`FAILED: ${p}\n`);
  if (failures.length > 0 || problems.length > 0 || verdicts.some((v) => !v.pass)) process.exitCode = 1;
}

main().catch((err: Error) => {
  process.stderr.write(`\nsoak: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
