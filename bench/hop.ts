// `npm run bench:hop` (issue 4's benchmark): what the server's router -> worker hop adds
// to a small proxied request, and what a server costs to start and to keep resident.
// For each worker count it starts `tito-server serve` as a child (time to the ready
// line; RSS of every process once ready, pids from GET /supervision), then times
// `GET /sessions/{id}/v1/models` through the server against `GET /v1/models` straight to
// the engine, alternating blocks so machine noise hits all alike; two more legs (the
// router alone, router -> worker without the engine) show where the added time goes.
// The floor (issue 20) is a fifth leg: the same request through a bare topology of the
// same shape (bench/bare-topology.ts: node:http router, one Unix socket, a worker calling
// the engine over keep-alive HTTP), started afresh beside each server. The target is a
// ratio from one run: what the proxied request adds over a direct call is at most 1.3×
// what the bare chain adds, at p50.
// Then every route the router relays, with three clients (bench/hop-routes.ts).
// It is a client only: it stops exactly the processes it started.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { Pool, request } from "undici";
import { cpuMs, machineCpu, rssMiB, stealShare } from "./rollout-proc-stats.ts";
import {
  cpuProfEnv,
  killStartedOnExit,
  startChild,
  startEngine,
  startServer,
  stopServer,
  type Started,
} from "./rollout-procs.ts";
import { fmt, summarize, type LatencySummary } from "./rollout-stats.ts";
import { benchArgs } from "./bench-args.ts";
import { codeNote, gitState } from "./code-state.ts";
import { CLIENT_KINDS, type ClientKind } from "./hop-clients.ts";
import { measureRoutes, routesTable, type RouteRow } from "./hop-routes.ts";

const USAGE = `Usage: npm run bench:hop -- [--workers 1,2,8] [--requests N] [--route-requests N] [--route-warmup N] [--clients LIST] [--out FILE] [--cpu-prof DIR]

  --workers LIST   worker counts to start (default 1,2,8)
  --requests N     timed requests per path per worker count (default 2000)
  --route-requests N  timed requests per route, client and worker count in the
                   every-route part (default 500; 0 leaves that part out)
  --route-warmup N unmeasured requests per route through each router before the
                   every-route part is timed (default 4000; a router's CPU per
                   chat turn settles after a few thousand)
  --clients LIST   the clients of the every-route part: inproc, child, curl (default all)
  --out FILE       also write the results as JSON
  --cpu-prof DIR   write a V8 .cpuprofile of every server process (host, router, workers) into DIR`;

const BLOCK = 100;
const SESSION_ID = "0123456789abcdef0123456789abcdef"; // the proxy route does not need the session to exist

interface HopRow {
  workers: number;
  startupMs: number;
  rssMiB: Record<string, number>;
  direct: LatencySummary;
  proxied: LatencySummary;
  /** Legs of the proxied path, for locating the cost: the router alone, and router -> worker without the engine. */
  routerOnly: LatencySummary;
  routerWorker: LatencySummary;
  /** The floor: the same request through bench/bare-topology.ts. */
  bare: LatencySummary;
  cpuUsPerRequest: LegCpu;
  addedP50Us: number;
  addedP99Us: number;
  bareAddedP50Us: number;
  /** addedP50Us / bareAddedP50Us: the target is at most 1.3. */
  hopRatio: number;
  /** Every route with every client (bench/hop-routes.ts). */
  routes: RouteRow[];
}

interface Args {
  workers: number[];
  requests: number;
  routeRequests: number;
  routeWarmup: number;
  clients: ClientKind[];
  out?: string;
  cpuProf?: string;
}

function parse(argv: string[]): Args {
  const values = benchArgs("bench:hop", USAGE, argv, {
    workers: { type: "string" },
    requests: { type: "string" },
    "route-requests": { type: "string" },
    "route-warmup": { type: "string" },
    clients: { type: "string" },
    out: { type: "string" },
    "cpu-prof": { type: "string" },
  });
  const workers = (values.workers ?? "1,2,8").split(",").map(Number);
  const requests = Number(values.requests ?? 2000);
  const routeRequests = Number(values["route-requests"] ?? 500);
  const routeWarmup = Number(values["route-warmup"] ?? 4000);
  const clients = (values.clients ?? CLIENT_KINDS.join(",")).split(",") as ClientKind[];
  if (
    !workers.every((w) => Number.isInteger(w) && w >= 1) ||
    !Number.isInteger(requests) ||
    requests < BLOCK ||
    !Number.isInteger(routeRequests) ||
    routeRequests < 0 ||
    !Number.isInteger(routeWarmup) ||
    routeWarmup < 0 ||
    !clients.every((c) => CLIENT_KINDS.includes(c))
  ) {
    process.stderr.write(
      `bench:hop: --workers must list integers >= 1, --requests be an integer >= ${BLOCK}, --route-requests and --route-warmup integers >= 0 and --clients list ${CLIENT_KINDS.join(", ")}\n\n${USAGE}\n`,
    );
    process.exit(2);
  }
  return { workers, requests, routeRequests, routeWarmup, clients, out: values.out, cpuProf: values["cpu-prof"] };
}

/** One request, body read to the end; returns µs. */
async function timed(pool: Pool, path: string, status: number): Promise<number> {
  const t0 = performance.now();
  const res = await pool.request({ method: "GET", path });
  await res.body.dump({ limit: Number.POSITIVE_INFINITY });
  if (res.statusCode !== status) throw new Error(`GET ${path}: status ${res.statusCode}, want ${status}`);
  return (performance.now() - t0) * 1000;
}

type Leg = "direct" | "proxied" | "routerOnly" | "routerWorker" | "bare";

interface Pids {
  router: number;
  workers: number[];
  engine: number;
  bareRouter: number;
  bareWorker: number;
}

/**
 * CPU µs per request of each process, per leg (from /proc; one tick is 10 ms over all of a
 * leg's requests). For the bare leg, "router" and "workers" are the bare router and worker.
 */
type LegCpu = Record<Leg, { router: number; workers: number; engine: number }>;

/** Alternating blocks of each leg, after an unmeasured warm-up of each. */
async function measureHop(
  urls: { engine: string; server: string; bare: string },
  requests: number,
  pids: Pids,
): Promise<{ latencies: Record<Leg, number[]>; cpu: LegCpu }> {
  const engine = new Pool(urls.engine, { connections: 1, keepAliveTimeout: 60_000 });
  const server = new Pool(urls.server, { connections: 1, keepAliveTimeout: 60_000 });
  const bare = new Pool(urls.bare, { connections: 1, keepAliveTimeout: 60_000 });
  const legs: [Leg, Pool, string, number][] = [
    ["bare", bare, `/sessions/${SESSION_ID}/v1/models`, 200],
    ["direct", engine, "/v1/models", 200],
    ["proxied", server, `/sessions/${SESSION_ID}/v1/models`, 200],
    // Served by the router from its own state: HTTP in and out, no hop.
    ["routerOnly", server, "/supervision", 200],
    // Router -> worker -> router, no engine: the session does not exist, the worker says 404.
    ["routerWorker", server, `/sessions/${SESSION_ID}`, 404],
  ];
  const out: Record<Leg, number[]> = { direct: [], proxied: [], routerOnly: [], routerWorker: [], bare: [] };
  const zero = () => ({ router: 0, workers: 0, engine: 0 });
  const cpu: LegCpu = { direct: zero(), proxied: zero(), routerOnly: zero(), routerWorker: zero(), bare: zero() };
  const now = (leg: Leg) => ({
    router: cpuMs(leg === "bare" ? pids.bareRouter : pids.router),
    workers: leg === "bare" ? cpuMs(pids.bareWorker) : pids.workers.reduce((sum, pid) => sum + cpuMs(pid), 0),
    engine: cpuMs(pids.engine),
  });
  try {
    for (let i = 0; i < 2 * BLOCK; i++) for (const [, pool, path, status] of legs) await timed(pool, path, status);
    for (let block = 0; block < requests / BLOCK; block++) {
      for (const [leg, pool, path, status] of legs) {
        const before = now(leg);
        for (let i = 0; i < BLOCK; i++) out[leg].push(await timed(pool, path, status));
        const after = now(leg);
        for (const k of ["router", "workers", "engine"] as const) cpu[leg][k] += after[k] - before[k];
      }
    }
  } finally {
    await Promise.all([engine.close(), server.close(), bare.close()]);
  }
  for (const leg of Object.keys(cpu) as Leg[])
    for (const k of ["router", "workers", "engine"] as const) cpu[leg][k] = (cpu[leg][k] * 1000) / out[leg].length;
  return { latencies: out, cpu };
}

async function supervisionPids(url: string): Promise<Record<string, number>> {
  const res = await request(`${url}/supervision`);
  const tree = (await res.body.json()) as {
    host_pid: number;
    router: { pid: number };
    shards: { index: number; pid: number }[];
  };
  const pids: Record<string, number> = { host: tree.host_pid, router: tree.router.pid };
  for (const shard of tree.shards) pids[`worker-${shard.index}`] = shard.pid;
  return pids;
}

interface Floor {
  url: string;
  routerPid: number;
  workerPid: number;
  stop(): Promise<void>;
}

/** Starts bench/bare-topology.ts's worker, then its router, in front of the engine. */
async function startFloor(engineUrl: string): Promise<Floor> {
  const socket = join(tmpdir(), `tito-bare-${process.pid}.sock`);
  const script = ["--import", "tsx", "bench/bare-topology.ts"];
  const started: Started[] = [];
  try {
    started.push(
      await startChild({
        name: "bare-worker",
        args: [...script, "worker", "--socket", socket, "--engine", engineUrl],
        ready: /^bare-worker ready url=(\S+)/,
      }),
    );
    started.push(
      await startChild({
        name: "bare-router",
        args: [...script, "router", "--socket", socket],
        ready: /^bare-router ready url=(\S+)/,
      }),
    );
  } catch (err) {
    await Promise.all(started.map((s) => s.stop()));
    throw err;
  }
  const [worker, router] = started as [Started, Started];
  return {
    url: router.url,
    routerPid: router.pid,
    workerPid: worker.pid,
    stop: async () => {
      await router.stop();
      await worker.stop();
    },
  };
}

async function runOne(
  workers: number,
  engine: { url: string; pid: number },
  floor: Floor,
  { requests, routeRequests, routeWarmup, clients }: Args,
  env?: Record<string, string>,
): Promise<HopRow> {
  const server = await startServer(workers, engine.url, [], false, env);
  let childPids: number[] = [];
  try {
    const pids = await supervisionPids(server.url);
    childPids = Object.entries(pids)
      .filter(([n]) => n !== "host")
      .map(([, pid]) => pid);
    const rss = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, rssMiB(pid)]));
    const workerPids = Object.entries(pids)
      .filter(([n]) => n.startsWith("worker-"))
      .map(([, pid]) => pid);
    const { latencies: legs, cpu } = await measureHop(
      { engine: engine.url, server: server.url, bare: floor.url },
      requests,
      {
        router: pids.router,
        workers: workerPids,
        engine: engine.pid,
        bareRouter: floor.routerPid,
        bareWorker: floor.workerPid,
      },
    );
    const routes =
      routeRequests === 0
        ? []
        : await measureRoutes(
            {
              serverUrl: server.url,
              bareUrl: floor.url,
              routerPid: pids.router,
              workerPids: workerPids,
              barePids: { router: floor.routerPid, worker: floor.workerPid },
            },
            clients,
            routeRequests,
            routeWarmup,
          );
    const d = summarize(legs.direct);
    const p = summarize(legs.proxied);
    const b = summarize(legs.bare);
    return {
      workers,
      startupMs: server.startupMs,
      rssMiB: rss,
      direct: d,
      proxied: p,
      routerOnly: summarize(legs.routerOnly),
      routerWorker: summarize(legs.routerWorker),
      bare: b,
      cpuUsPerRequest: cpu,
      addedP50Us: p.p50 - d.p50,
      addedP99Us: p.p99 - d.p99,
      bareAddedP50Us: b.p50 - d.p50,
      hopRatio: (p.p50 - d.p50) / (b.p50 - d.p50),
      routes,
    };
  } finally {
    for (const problem of await stopServer(server, childPids)) process.stderr.write(`bench:hop: warning: ${problem}\n`);
  }
}

function table(rows: HopRow[]): string {
  const lines = [
    "| workers | startup to ready ms | RSS host MiB | RSS router MiB | RSS per worker MiB | RSS total MiB | direct p50 / p99 µs | via server p50 / p99 µs | added p50 µs | added p99 µs |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of rows) {
    const workerRss = Object.entries(r.rssMiB)
      .filter(([n]) => n.startsWith("worker-"))
      .map(([, v]) => v);
    const total = Object.values(r.rssMiB).reduce((a, b) => a + b, 0);
    const perWorker = `${fmt(Math.min(...workerRss), 0)}–${fmt(Math.max(...workerRss), 0)}`;
    lines.push(
      `| ${r.workers} | ${fmt(r.startupMs, 0)} | ${fmt(r.rssMiB.host, 0)} | ${fmt(r.rssMiB.router, 0)} | ${perWorker} | ${fmt(total, 0)} | ` +
        `${fmt(r.direct.p50, 0)} / ${fmt(r.direct.p99, 0)} | ${fmt(r.proxied.p50, 0)} / ${fmt(r.proxied.p99, 0)} | ${fmt(r.addedP50Us, 0)} | ${fmt(r.addedP99Us, 0)} |`,
    );
  }
  lines.push(
    "",
    "Where the time goes — latency p50 / p99 µs, then CPU µs per request (router · workers · engine):",
    "",
    "| workers | router only (GET /supervision) | router -> worker, no engine (GET /sessions/{missing}: 404) | proxied (GET /sessions/{id}/v1/models) | direct to the engine | bare topology (the floor) |",
    "|---|---|---|---|---|---|",
  );
  for (const r of rows) {
    const cell = (leg: Leg, l: LatencySummary) => {
      const c = r.cpuUsPerRequest[leg];
      return `${fmt(l.p50, 0)} / ${fmt(l.p99, 0)} — CPU ${fmt(c.router, 0)} · ${fmt(c.workers, 0)} · ${fmt(c.engine, 0)}`;
    };
    lines.push(
      `| ${r.workers} | ${cell("routerOnly", r.routerOnly)} | ${cell("routerWorker", r.routerWorker)} | ${cell("proxied", r.proxied)} | ${cell("direct", r.direct)} | ${cell("bare", r.bare)} |`,
    );
  }
  lines.push(
    "",
    "The hop against its floor — added p50 µs over a direct engine call:",
    "",
    "| workers | tito-server adds | bare topology adds | ratio (target ≤ 1.3) |",
    "|---|---|---|---|",
  );
  for (const r of rows)
    lines.push(`| ${r.workers} | ${fmt(r.addedP50Us, 0)} | ${fmt(r.bareAddedP50Us, 0)} | ${fmt(r.hopRatio, 2)} |`);
  lines.push(...routesTable(rows));
  return lines.join("\n");
}

async function main(): Promise<void> {
  const { workers, requests, out, cpuProf, ...args } = parse(process.argv.slice(2));
  const env = cpuProf ? cpuProfEnv(cpuProf) : undefined;
  killStartedOnExit();
  const load = loadavg();
  const cpuAtStart = machineCpu();
  const git = gitState(); // the code as it was when the servers started
  const engine = await startEngine([]);
  const rows: HopRow[] = [];
  try {
    for (const w of workers) {
      if (process.stderr.isTTY) process.stderr.write(`bench:hop: ${w} worker(s)…\n`);
      // A fresh floor beside each fresh server: both get the same warm-up. One floor for the
      // whole run had served thousands of requests (its JIT done) before a later server's first.
      const floor = await startFloor(engine.url);
      try {
        rows.push(await runOne(w, engine, floor, { workers, requests, ...args }, env));
      } finally {
        await floor.stop();
      }
    }
  } finally {
    await engine.stop();
  }
  process.stdout.write(
    `### Hop benchmark — GET /sessions/{id}/v1/models via tito-server vs GET /v1/models on the engine, ${requests} requests each, sequential\n\n`,
  );
  process.stdout.write(`${table(rows)}\n\n`);
  const worst = Math.max(...rows.map((r) => r.hopRatio));
  process.stdout.write(
    `target: the proxied request adds at most 1.3× what the bare topology adds, at p50 — worst measured ${fmt(worst, 2)}×: ${worst <= 1.3 ? "met" : "NOT met"}\n`,
  );
  const routeRatios = rows.flatMap((r) => r.routes.map((x) => x.ratio));
  if (routeRatios.length > 0) {
    const worstRoute = Math.max(...routeRatios);
    process.stdout.write(
      `target: on every route and client, the router adds at most 1.3× what the bare router adds, at p50, after ${args.routeWarmup} unmeasured requests per route — worst measured ${fmt(worstRoute, 2)}×: ${worstRoute <= 1.3 ? "met" : "NOT met"}\n`,
    );
  }
  const steal = stealShare(cpuAtStart);
  process.stdout.write(
    `load average at start: ${load.map((l) => l.toFixed(2)).join(" ")}, CPU steal ${steal} (${process.version}${codeNote(git)})\n`,
  );
  if (out) {
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(
      out,
      `${JSON.stringify({ requests, routeWarmup: args.routeWarmup, loadavg: load, cpuSteal: steal, node: process.version, ...git, rows }, null, 1)}\n`,
    );
    process.stdout.write(`results: ${out}\n`);
  }
}

main().catch((err: Error) => {
  process.stderr.write(`bench:hop: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
