// The rollout benchmark's summary: medians over repeats per run label, the ratios the
// issue asks for (wN/w1, server vs floor, CPU per turn vs floor, added latency per
// sequential turn), the targets of the chosen preset, and the markdown on stdout.
// Pure formatting over RunResult values; it measures nothing itself.
import type { RolloutConfig } from "./rollout-args.ts";
import type { RunResult } from "./rollout-run.ts";
import { fmt, fmtRatio, median } from "./rollout-stats.ts";

export interface LabelSummary {
  label: string;
  runs: number;
  turnsPerSec: number;
  chatP50: number;
  chatP99: number;
  seqP50: number;
  serverCpuPerTurn: number;
  engineCpuPerTurn: number;
  serverPeakMiB: number | null;
  recordsGetP50: number | null;
  recordsGetMiB: number | null;
  soloGetMs: number | null;
}

export interface Ratio {
  name: string;
  value: number;
  unit: "x" | "ms" | "n";
  target?: string;
  met?: boolean;
}

const MIB = 1024 * 1024;

export function summarizeLabels(runs: RunResult[]): LabelSummary[] {
  // floor first, then by worker count, whatever order the runs finished in
  // base-wN (the baseline checkout) just before wN
  const order = (label: string) =>
    label === "floor" ? 0 : label.startsWith("base-") ? Number(label.slice(6)) - 0.5 : Number(label.slice(1));
  const labels = [...new Set(runs.map((r) => r.label))].sort((a, b) => order(a) - order(b));
  return labels.map((label) => {
    const of = runs.filter((r) => r.label === label);
    const med = (pick: (r: RunResult) => number | null | undefined) =>
      median(of.map(pick).filter((v): v is number => typeof v === "number"));
    const hasGet = of.some((r) => r.recordsGet);
    return {
      label,
      runs: of.length,
      turnsPerSec: med((r) => r.turnsPerSec),
      chatP50: med((r) => r.chat.p50),
      chatP99: med((r) => r.chat.p99),
      seqP50: med((r) => r.sequential.p50),
      serverCpuPerTurn: med((r) => r.cpuPerTurnMs.server),
      engineCpuPerTurn: med((r) => r.cpuPerTurnMs.engine),
      serverPeakMiB: of[0].kind === "server" ? med((r) => r.rss.serverGroupPeakMiB) : null,
      recordsGetP50: hasGet ? med((r) => r.recordsGet?.p50) : null,
      recordsGetMiB: hasGet ? med((r) => (r.recordsGet ? r.recordsGet.bytesMean / MIB : null)) : null,
      soloGetMs: of.some((r) => r.soloRecordsGet) ? med((r) => r.soloRecordsGet?.ms) : null,
    };
  });
}

/** The issue's ratios, with the preset's targets where the issue states one. */
export function ratios(config: RolloutConfig, labels: LabelSummary[]): Ratio[] {
  const floor = labels.find((l) => l.label === "floor");
  const w1 = labels.find((l) => l.label === "w1");
  const out: Ratio[] = [];
  const small = config.preset === "small";
  const r3 = config.preset === "r3";
  for (const l of labels) {
    if (l.label === "floor" || l.label === "w1" || isBaseline(l.label) || !w1) continue;
    const target = r3 && l.label === "w2" ? { target: ">= 1.5x", met: l.turnsPerSec / w1.turnsPerSec >= 1.5 } : {};
    out.push({ name: `throughput ${l.label}/w1`, value: l.turnsPerSec / w1.turnsPerSec, unit: "x", ...target });
  }
  out.push(...baselineRatios(config, labels));
  if (!floor) return out;
  for (const l of labels) {
    if (l.label === "floor") continue;
    out.push({ name: `throughput ${l.label} vs floor`, value: l.turnsPerSec / floor.turnsPerSec, unit: "x" });
  }
  for (const l of labels) {
    if (l.label === "floor") continue;
    out.push({
      name: `server CPU per turn ${l.label} vs floor (engine CPU per turn)`,
      value: l.serverCpuPerTurn / floor.engineCpuPerTurn,
      unit: "x",
    });
  }
  for (const l of labels) {
    if (l.label === "floor") continue;
    const added = l.seqP50 - floor.seqP50;
    const target = small ? { target: "< 0.5 ms", met: added < 0.5 } : {};
    out.push({
      name: `added latency per sequential turn ${l.label} (seq p50 - floor seq p50)`,
      value: added,
      unit: "ms",
      ...target,
    });
    out.push({
      name: `added chat p50 under load ${l.label} (p50 - floor p50)`,
      value: l.chatP50 - floor.chatP50,
      unit: "ms",
    });
  }
  return out;
}

const isBaseline = (label: string) => label.startsWith("base-");

/** The target of the small preset against the baseline (issue 20): server CPU per turn at least 30% below it. */
const SMALL_CPU_VS_BASELINE = 0.7;

/** This code against the baseline checkout (--baseline-root), per worker count run both ways. */
function baselineRatios(config: RolloutConfig, labels: LabelSummary[]): Ratio[] {
  const out: Ratio[] = [];
  for (const base of labels.filter((l) => isBaseline(l.label))) {
    const ours = labels.find((l) => l.label === base.label.slice("base-".length));
    if (!ours) continue;
    const cpu = ours.serverCpuPerTurn / base.serverCpuPerTurn;
    const target =
      config.preset === "small"
        ? { target: `<= ${SMALL_CPU_VS_BASELINE.toFixed(2)}x`, met: cpu <= SMALL_CPU_VS_BASELINE }
        : {};
    out.push({ name: `server CPU per turn ${ours.label} vs ${base.label}`, value: cpu, unit: "x", ...target });
    out.push({
      name: `throughput ${ours.label} vs ${base.label}`,
      value: ours.turnsPerSec / base.turnsPerSec,
      unit: "x",
    });
  }
  return out;
}

/** Absolute targets of issue 7 for the preset, as ratio-like rows. */
export function targets(config: RolloutConfig, labels: LabelSummary[]): Ratio[] {
  const w1 = labels.find((l) => l.label === "w1");
  if (!w1) return [];
  const servers = labels.filter((l) => l.label !== "floor" && !isBaseline(l.label));
  const worstCpu = Math.max(...servers.map((l) => l.serverCpuPerTurn));
  if (config.preset === "small") {
    return [
      {
        name: "w1 turns/s (reference 260)",
        value: w1.turnsPerSec,
        unit: "n",
        target: ">= 780 (3x)",
        met: w1.turnsPerSec >= 780,
      },
      {
        name: "server CPU ms per turn (worst worker count)",
        value: worstCpu,
        unit: "ms",
        target: "< 1 ms",
        met: worstCpu < 1,
      },
    ];
  }
  if (config.preset === "r3") {
    const peak = Math.max(...servers.map((l) => l.serverPeakMiB ?? 0));
    const get = Math.max(...servers.map((l) => l.soloGetMs ?? Number.NaN));
    return [
      {
        name: "w1 turns/s (reference 11)",
        value: w1.turnsPerSec,
        unit: "n",
        target: ">= 33 (3x)",
        met: w1.turnsPerSec >= 33,
      },
      {
        name: "server CPU ms per turn (worst worker count)",
        value: worstCpu,
        unit: "ms",
        target: "< 25 ms",
        met: worstCpu < 25,
      },
      {
        name: "solo records GET ms, ~88 MiB (worst worker count)",
        value: get,
        unit: "ms",
        target: "< 1000 ms",
        met: get < 1000,
      },
      {
        name: "server peak RSS MiB (worst worker count)",
        value: peak,
        unit: "n",
        target: "< 600 MiB",
        met: peak < 600,
      },
    ];
  }
  if (config.preset === "reference") return referenceRows(labels, servers);
  return [];
}

/**
 * The reference's published figures for its overhead benchmark (issue 47): 58 turns/s on one
 * instance, 476 on 16 instances of a 192-core machine, so 8.2x for 16x the processes (0.51
 * per added instance's share). Compared as ratios (scaling per worker), never absolute:
 * machines differ.
 */
const REFERENCE_TURNS_PER_S = { 1: 58, 16: 476 } as const;

function referenceRows(labels: LabelSummary[], servers: LabelSummary[]): Ratio[] {
  const w1 = labels.find((l) => l.label === "w1")!;
  const refScaling = REFERENCE_TURNS_PER_S[16] / REFERENCE_TURNS_PER_S[1];
  const rows: Ratio[] = [];
  for (const l of servers) {
    if (l.label === "w1") continue;
    const n = Number(l.label.slice(1));
    rows.push({
      name: `scaling efficiency ${l.label}: (turns/s ${l.label} / w1) / ${n} (reference, 16 instances: ${(refScaling / 16).toFixed(2)})`,
      value: l.turnsPerSec / w1.turnsPerSec / n,
      unit: "x",
    });
  }
  rows.push({
    name: `w1 turns/s per reference w1 turns/s (${REFERENCE_TURNS_PER_S[1]}; different machines)`,
    value: w1.turnsPerSec / REFERENCE_TURNS_PER_S[1],
    unit: "x",
  });
  return rows;
}

function perProcess(values: Record<string, number>, digits: number): string {
  const workers = Object.keys(values)
    .filter((n) => n.startsWith("worker-"))
    .map((n) => fmt(values[n], digits));
  const streamers = Object.keys(values)
    .filter((n) => n.startsWith("streamer-"))
    .map((n) => `${n.slice("streamer-".length)}:${fmt(values[n], digits)}`);
  if (!("host" in values)) return "-";
  const s = streamers.length ? ` · s ${streamers.join("/")}` : "";
  return `h ${fmt(values.host, digits)} · r ${fmt(values.router, digits)} · w ${workers.join("/")}${s}`;
}

/** Cores the ceiling is projected for (issue 20). */
const PROJECTED_CORES = [8, 16, 32];

export interface FrontShare {
  /** The busiest non-worker process (router or host) and its share of the server's CPU. */
  process: string;
  share: number;
  /** Turns/s ceilings at PROJECTED_CORES from CPU per turn: see frontTable. */
  ceilings: number[];
}

/**
 * The front's share and the ceiling it sets (issue 20). Worker CPU per turn divides across
 * workers, front CPU per turn does not: with C cores, one for the front and C - 1 workers,
 * turns/s <= min(1000 / router ms, 1000 / host ms, (C - 1) * 1000 / all workers' ms).
 */
export function frontShare(run: RunResult): FrontShare | undefined {
  if (run.kind !== "server") return undefined;
  const per = run.cpuPerTurnMs.perProcess;
  // A worker's records streamer is worker-side work: there is one per worker.
  const workers = Object.entries(per)
    .filter(([n]) => n.startsWith("worker-") || n.startsWith("streamer-"))
    .reduce((sum, [, v]) => sum + v, 0);
  const front = (["router", "host"] as const).map((n) => ({ n, ms: per[n] ?? 0 }));
  const total = workers + front.reduce((sum, f) => sum + f.ms, 0);
  const busiest = front.reduce((a, b) => (b.ms > a.ms ? b : a));
  const frontCap = busiest.ms > 0 ? 1000 / busiest.ms : Number.POSITIVE_INFINITY;
  return {
    process: busiest.n,
    share: total > 0 ? busiest.ms / total : 0,
    ceilings: PROJECTED_CORES.map((c) => Math.min(frontCap, workers > 0 ? ((c - 1) * 1000) / workers : frontCap)),
  };
}

function frontTable(runs: RunResult[]): string[] {
  const lines = [
    `The front (issue 20): the busiest non-worker process's share of the server's CPU (target ≤ 20%), and the turns/s ceiling projected from CPU per turn at ${PROJECTED_CORES.join(", ")} cores (one core for the front, the rest workers; worker CPU divides across workers, front CPU does not):`,
    "",
    `| run | busiest front process | its share of server CPU | ${PROJECTED_CORES.map((c) => `ceiling at ${c} cores, turns/s`).join(" | ")} |`,
    `|---|---|---|${PROJECTED_CORES.map(() => "---|").join("")}`,
  ];
  for (const r of runs) {
    const f = frontShare(r);
    if (!f) continue;
    lines.push(
      `| ${r.label}${r.repeat > 1 ? ` #${r.repeat}` : ""} | ${f.process} | ${fmt(100 * f.share, 1)}% | ${f.ceilings.map((c) => fmt(c, 0)).join(" | ")} |`,
    );
  }
  return lines;
}

export function describe(config: RolloutConfig): string {
  const r3 = config.r3LastMiB > 0 ? `routed_experts growing to ${config.r3LastMiB} MiB` : "no routed_experts";
  return (
    `preset ${config.preset}, engine API ${config.engineApi}: ${config.sessions} sessions x ${config.turns} turns, input ${config.inputTokens} / output ${config.outputTokens} tokens, ` +
    `${r3}${config.getRecords ? ", records GET per session" : ""}, engine latency ${config.latencyMs} ms, workers ${config.workers.join(",")}, repeat ${config.repeat}, warm-up ${config.warmup} pass${config.warmup === 1 ? "" : "es"}, ${config.passes} measured pass${config.passes === 1 ? "" : "es"}`
  );
}

export function markdown(config: RolloutConfig, runs: RunResult[], labels: LabelSummary[]): string {
  const lines: string[] = [];
  lines.push(`### Rollout benchmark — ${describe(config)}`, "");
  lines.push(
    "| run | wall s | turns/s | chat p50 ms | p95 | p99 | seq p50 ms | records GET p50 ms (concurrent) | solo GET ms | GET MiB | server CPU ms/turn | of which sys | per process (host · router · workers · streamers) | read/write syscalls per turn (h · r · w · s) | minor page faults per turn (h · r · w · s) | sessions per worker | engine CPU ms/turn | server peak RSS MiB | server peak PSS MiB | idle RSS per process MiB | idle PSS per process MiB | peak RSS per process MiB (VmHWM) | startup s |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const r of runs) {
    const name = config.repeat > 1 ? `${r.label} #${r.repeat}` : r.label;
    const server = r.kind === "server";
    const procCpu = Object.fromEntries(Object.entries(r.cpuPerTurnMs.perProcess).filter(([n]) => n !== "engine"));
    const ioCalls = Object.fromEntries(Object.entries(r.ioCallsPerTurn.perProcess).filter(([n]) => n !== "engine"));
    const faults = Object.fromEntries(Object.entries(r.faultsPerTurn.perProcess).filter(([n]) => n !== "engine"));
    const hwm = Object.fromEntries(Object.entries(r.rss.hwmMiB).filter(([n]) => n !== "engine"));
    lines.push(
      `| ${name} | ${fmt(r.wallMs / 1000, 2)} | ${fmt(r.turnsPerSec, 1)} | ${fmt(r.chat.p50, 2)} | ${fmt(r.chat.p95, 2)} | ${fmt(r.chat.p99, 2)} | ${fmt(r.sequential.p50, 2)} | ` +
        `${r.recordsGet ? fmt(r.recordsGet.p50, 0) : "-"} | ${r.soloRecordsGet ? fmt(r.soloRecordsGet.ms, 0) : "-"} | ${r.recordsGet ? fmt(r.recordsGet.bytesMean / MIB, 1) : "-"} | ` +
        `${server ? fmt(r.cpuPerTurnMs.server, 2) : "-"} | ${server ? fmt(r.cpuPerTurnMs.serverSys, 2) : "-"} | ${server ? perProcess(procCpu, 2) : "-"} | ${server ? perProcess(ioCalls, 1) : "-"} | ${server ? perProcess(faults, 0) : "-"} | ${server ? r.sessionsPerWorker.join("/") : "-"} | ${fmt(r.cpuPerTurnMs.engine, 2)} | ` +
        `${server ? fmt(r.rss.serverGroupPeakMiB ?? Number.NaN, 0) : "-"} | ${server ? fmt(r.rss.serverGroupPeakPssMiB ?? Number.NaN, 0) : "-"} | ` +
        `${server ? perProcess(r.rss.idleMiB ?? {}, 0) : "-"} | ${server ? perProcess(r.rss.idlePssMiB ?? {}, 0) : "-"} | ${server ? perProcess(hwm, 0) : "-"} | ${r.startupMs === null ? "-" : fmt(r.startupMs / 1000, 2)} |`,
    );
  }
  lines.push("", ...frontTable(runs));
  const rows = ratios(config, labels);
  const goals = targets(config, labels);
  if (rows.length + goals.length > 0) {
    lines.push("", "| ratio / target | measured | target | met |", "|---|---|---|---|");
    for (const row of [...rows, ...goals]) {
      const value = row.unit === "x" ? fmtRatio(row.value) : `${fmt(row.value, 2)}${row.unit === "ms" ? " ms" : ""}`;
      lines.push(
        `| ${row.name} | ${value} | ${row.target ?? "-"} | ${row.met === undefined ? "-" : row.met ? "yes" : "NO"} |`,
      );
    }
  }
  return lines.join("\n");
}
