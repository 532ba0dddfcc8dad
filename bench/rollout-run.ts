// One measured run of the rollout benchmark: through a fresh tito-server with N workers,
// or straight to the engine (the floor). A run is: warm-up (unmeasured), a sequential
// probe (one session alone, for the added latency per turn), then the concurrent
// workload with CPU (/proc) and RSS measured around it. It starts and stops only the
// server it owns; the engine belongs to the caller.
import { request } from "undici";
import {
  cpuDelta,
  cpuSnapshot,
  NO_CPU,
  peakRssMiB,
  pssMiB,
  RssSampler,
  rssMiB,
  streamerPids,
} from "./rollout-proc-stats.ts";
import { startServer, stopServer, type Started } from "./rollout-procs.ts";
import { summarize, type LatencySummary } from "./rollout-stats.ts";
import { runPasses, runWorkload, Target, warmUp, type RunHooks, type WorkloadShape } from "./rollout-workload.ts";

export interface RunResult {
  label: string; // "floor" | "w1" | "w2" …
  kind: "floor" | "server";
  workers: number | null;
  repeat: number;
  startupMs: number | null;
  wallMs: number;
  turns: number;
  turnsPerSec: number;
  chat: LatencySummary;
  /** One session alone, turn by turn: latency without queueing behind other sessions. */
  sequential: LatencySummary;
  /** The records GETs of the concurrent workload (one per session, overlapping). */
  recordsGet: (LatencySummary & { bytesMean: number; bytesMax: number }) | null;
  /** The probe session's records GET, alone on the server. */
  soloRecordsGet: { ms: number; bytes: number } | null;
  pids: Record<string, number>;
  /** Sessions of the workload owned by each worker (the router hashes ids: the split can be uneven). */
  sessionsPerWorker: number[];
  /** CPU ms of each process during the concurrent workload. */
  cpuMs: Record<string, number>;
  /** Of cpuMs, the system (kernel) part: syscalls, page faults of fresh memory. */
  cpuSysMs: Record<string, number>;
  /** Read and write system calls per turn of each process (/proc/<pid>/io), and the server's sum. */
  ioCallsPerTurn: { server: number; perProcess: Record<string, number> };
  /** Minor page faults per turn of each process (/proc/<pid>/stat), and the server's sum. */
  faultsPerTurn: { server: number; perProcess: Record<string, number> };
  cpuPerTurnMs: {
    server: number;
    serverSys: number;
    engine: number;
    client: number;
    perProcess: Record<string, number>;
  };
  rss: {
    /** VmRSS of each server process once it is ready, before the warm-up (its idle memory), MiB. */
    idleMiB: Record<string, number>;
    /** The same processes' PSS then (shared pages divided among the processes that map them), MiB. */
    idlePssMiB: Record<string, number>;
    /** Sampled peak of the server's processes together (host + router + workers), MiB. */
    serverGroupPeakMiB: number | null;
    /** Their PSS summed, largest of the seldom samples (every 1 s and at the end), MiB. */
    serverGroupPeakPssMiB: number | null;
    /** Sampled per-process peaks during the workload, MiB. */
    sampledPeakMiB: Record<string, number>;
    /** VmHWM (peak since process start, exact) at the end of the run, MiB. */
    hwmMiB: Record<string, number>;
  };
  chatMs: number[];
  problems: string[];
}

export interface RunContext {
  engine: Started;
  shape: WorkloadShape;
  repeat: number;
  /** Unmeasured passes of the workload before the probe and the measured workload. */
  warmup: number;
  /** Measured passes of the workload, one after another, measured as one. */
  passes: number;
  serverFlags: string[];
  verbose: boolean;
  /** NODE_OPTIONS for the server (inherited by its children), e.g. --cpu-prof. */
  serverEnv?: Record<string, string>;
  hooks: RunHooks;
  note: (line: string) => void;
}

interface Tree {
  host_pid: number;
  router: { pid: number };
  shards: { index: number; pid: number }[];
}

async function supervisionPids(url: string): Promise<Record<string, number>> {
  const res = await request(`${url}/supervision`);
  const tree = (await res.body.json()) as Tree;
  if (res.statusCode !== 200) throw new Error(`GET /supervision: status ${res.statusCode}`);
  const pids: Record<string, number> = { host: tree.host_pid, router: tree.router.pid };
  for (const shard of tree.shards) pids[`worker-${shard.index}`] = shard.pid;
  return pids;
}

async function measure(
  target: Target,
  label: string,
  ctx: RunContext,
  groupPids: Record<string, number>,
): Promise<Omit<RunResult, "kind" | "workers" | "startupMs" | "problems">> {
  const { shape } = ctx;
  // Warm-up of every worker (JIT), the connections and the engine's reply cache; not measured.
  // One pass of the small workload leaves much of the hot code unoptimized (profiles of the
  // measured pass still showed ~20-30% of the server's CPU in V8's compiler), hence passes.
  const workerCount = Object.keys(groupPids).filter((n) => n.startsWith("worker-")).length;
  const idleMiB = Object.fromEntries(Object.entries(groupPids).map(([name, pid]) => [name, rssMiB(pid)]));
  const idlePssMiB = Object.fromEntries(Object.entries(groupPids).map(([name, pid]) => [name, pssMiB(pid)]));
  await warmUp(target, shape, workerCount, ctx.warmup);
  // The probe runs alone, so its records GET (if any) is also the "one GET afterwards" measurement.
  const probe = await runWorkload(target, { ...shape, sessions: 1 }, 800_000, ctx.hooks);

  // The workers' records streamers are the server's too (the warm-up's GETs started them).
  const serverPids = { ...groupPids, ...streamerPids(groupPids) };
  const pids: Record<string, number> = { ...serverPids, engine: ctx.engine.pid };
  const cpu0 = cpuSnapshot(pids);
  // The group peak sums only the server's processes: the engine is not the server's memory.
  const sampler = new RssSampler(pids, Object.keys(serverPids));
  const result = await runPasses(target, shape, ctx.passes, ctx.hooks);
  const sampled = sampler.stop();
  // A streamer that started during the run: all it spent is the run's.
  for (const [name, pid] of Object.entries(streamerPids(groupPids)))
    if (!(name in pids)) [pids[name], serverPids[name], cpu0[name]] = [pid, pid, NO_CPU];
  const cpu1 = cpuSnapshot(pids);
  const cpuMs = cpuDelta(cpu0, cpu1);
  const cpuSysMs = cpuDelta(cpu0, cpu1, "sys");
  const ioCalls = cpuDelta(cpu0, cpu1, "ioCalls");
  const faults = cpuDelta(cpu0, cpu1, "minorFaults");
  const perTurn = (counts: Record<string, number>) => ({
    server: Object.keys(serverPids).reduce((sum, name) => sum + counts[name], 0) / result.turns,
    perProcess: Object.fromEntries(Object.entries(counts).map(([name, n]) => [name, n / result.turns])),
  });

  const perProcess = Object.fromEntries(Object.entries(cpuMs).map(([name, ms]) => [name, ms / result.turns]));
  const serverCpu = Object.keys(serverPids).reduce((sum, name) => sum + cpuMs[name], 0);
  const serverSys = Object.keys(serverPids).reduce((sum, name) => sum + cpuSysMs[name], 0);
  return {
    label,
    repeat: ctx.repeat,
    wallMs: result.wallMs,
    turns: result.turns,
    turnsPerSec: result.turns / (result.wallMs / 1000),
    chat: summarize(result.chatMs),
    sequential: summarize(probe.chatMs),
    recordsGet: result.recordsGetMs.length
      ? {
          ...summarize(result.recordsGetMs),
          bytesMean: result.recordsGetBytes.reduce((a, b) => a + b, 0) / result.recordsGetBytes.length,
          bytesMax: Math.max(...result.recordsGetBytes),
        }
      : null,
    soloRecordsGet: probe.recordsGetMs.length ? { ms: probe.recordsGetMs[0], bytes: probe.recordsGetBytes[0] } : null,
    pids,
    sessionsPerWorker: Array.from({ length: workerCount }, (_, i) => result.shards.filter((s) => s === i).length),
    cpuMs,
    cpuSysMs,
    ioCallsPerTurn: perTurn(ioCalls),
    faultsPerTurn: perTurn(faults),
    cpuPerTurnMs: {
      server: serverCpu / result.turns,
      serverSys: serverSys / result.turns,
      engine: cpuMs.engine / result.turns,
      client: result.clientCpuMs / result.turns,
      perProcess,
    },
    rss: {
      idleMiB,
      idlePssMiB,
      serverGroupPeakMiB: Object.keys(groupPids).length ? sampled.group : null,
      serverGroupPeakPssMiB: Object.keys(groupPids).length ? sampled.groupPss : null,
      sampledPeakMiB: sampled.perProcess,
      hwmMiB: Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, peakRssMiB(pid)])),
    },
    chatMs: result.chatMs,
  };
}

export async function runFloor(ctx: RunContext): Promise<RunResult> {
  ctx.note(`floor (engine alone), repeat ${ctx.repeat}`);
  const target = new Target("floor", ctx.engine.url, { sessions: false, connections: ctx.shape.sessions + 2 });
  try {
    const measured = await measure(target, "floor", ctx, {});
    return { ...measured, kind: "floor", workers: null, startupMs: null, problems: [] };
  } finally {
    await target.close();
  }
}

/** A run through a fresh server with `workers` workers: this checkout's (label wN), or the baseline's (base-wN). */
export async function runServer(workers: number, ctx: RunContext, baselineRoot?: string): Promise<RunResult> {
  const label = `${baselineRoot ? "base-" : ""}w${workers}`;
  const what = baselineRoot ? `the baseline's tito-server (${baselineRoot})` : "tito-server";
  ctx.note(`${what} with ${workers} worker(s), repeat ${ctx.repeat}: starting`);
  const server = await startServer(workers, ctx.engine.url, ctx.serverFlags, ctx.verbose, ctx.serverEnv, baselineRoot);
  let childPids: number[] = [];
  const problems: string[] = [];
  try {
    ctx.note(
      `${what} with ${workers} worker(s), repeat ${ctx.repeat}: ready in ${(server.startupMs / 1000).toFixed(1)} s, running`,
    );
    const pids = await supervisionPids(server.url);
    childPids = Object.entries(pids)
      .filter(([name]) => name !== "host")
      .map(([, pid]) => pid);
    if (pids.host !== server.pid)
      problems.push(`/supervision host_pid ${pids.host} is not the CLI's pid ${server.pid}`);
    const target = new Target(label, server.url, { sessions: true, connections: ctx.shape.sessions + 2 });
    try {
      const measured = await measure(target, label, ctx, pids);
      return { ...measured, kind: "server", workers, startupMs: server.startupMs, problems };
    } finally {
      await target.close();
    }
  } finally {
    problems.push(...(await stopServer(server, childPids)));
    for (const problem of problems) ctx.note(`warning: ${problem}`);
  }
}
