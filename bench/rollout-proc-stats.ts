// Per-process CPU and memory from Linux /proc, for the benchmarks.
// CPU: the exact run time of every thread of the process (/proc/<pid>/task/<tid>/schedstat,
// in ns), summed; where the kernel does not expose it, utime+stime of /proc/<pid>/stat
// (all threads, in clock ticks: 10 ms at CLK_TCK=100, which is as much as a tenth of a
// short measured run of small turns). The user/system split only exists in ticks.
// Memory: VmRSS sampled on a timer (for the peak of a group of processes at the same
// moment) and VmHWM (the kernel's exact per-process peak since the process started).
// RSS counts a page shared by several processes in each of them: the `node` binary's code
// (~42 MiB of clean file pages) is in every server process's RSS. PSS (smaps_rollup)
// divides each shared page among the processes that map it, so a group's PSS sum is the
// memory the group takes; reading it walks the process's page tables (~1.4 ms for a
// 250 MiB process here), so it is sampled seldom.
// It only reads /proc; it never signals anything.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

export const CPU_TICK_MS = 1000 / CLK_TCK;

/** utime and stime of a process in ms, and its minor page faults so far (NaN when it is gone). */
export function cpuSplitMs(pid: number): { user: number; sys: number; minorFaults: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    // The command name (field 2) may hold spaces and parentheses: split after the last ")".
    // From field 3 on: minflt is field 10, utime 14, stime 15 (proc(5)).
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return {
      user: (Number(fields[11]) * 1000) / CLK_TCK,
      sys: (Number(fields[12]) * 1000) / CLK_TCK,
      minorFaults: Number(fields[7]),
    };
  } catch {
    return { user: Number.NaN, sys: Number.NaN, minorFaults: Number.NaN };
  }
}

/** One reading of a process's CPU counters (and of its read/write system call count). */
export interface ProcCpu {
  /** Run time of each live thread, ns (schedstat's first field); undefined where unreadable. */
  threadsNs: Map<string, number> | undefined;
  /** utime and stime of the whole process, ms, rounded to clock ticks. */
  userMs: number;
  sysMs: number;
  /** Read- and write-family system calls so far (syscr + syscw of /proc/<pid>/io, all threads); NaN where unreadable. */
  ioCalls: number;
  /**
   * Minor page faults so far (all threads): each is a page of memory touched for the first
   * time since it was mapped (fresh heap, a new buffer), which the kernel must find and map.
   * Page-cache pages a write() fills are not faults and do not count.
   */
  minorFaults: number;
}

function threadRunNs(pid: number): Map<string, number> | undefined {
  try {
    const threads = new Map<string, number>();
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "latin1").split(" ", 1)[0]);
        if (Number.isFinite(ns)) threads.set(tid, ns);
      } catch {
        // The thread ended between the listing and the read: its time is lost either way.
      }
    }
    return threads.size ? threads : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A process's read and write system calls so far (socket and file alike; not epoll or
 * timers): unlike CPU time, an exact count that the machine's noise does not move, so a
 * change that batches writes shows as a smaller number per turn. NaN when unreadable.
 */
function ioCalls(pid: number): number {
  try {
    const lines = readFileSync(`/proc/${pid}/io`, "latin1").trim().split("\n");
    const fields = Object.fromEntries(lines.map((line) => line.split(": ")));
    return Number(fields.syscr) + Number(fields.syscw);
  } catch {
    return Number.NaN;
  }
}

/** The CPU counters of a process now (NaN and no threads when it is gone). */
export function readProcCpu(pid: number): ProcCpu {
  const { user, sys, minorFaults } = cpuSplitMs(pid);
  return { threadsNs: threadRunNs(pid), userMs: user, sysMs: sys, ioCalls: ioCalls(pid), minorFaults };
}

/**
 * CPU ms a process spent between two readings: the threads' exact run time where both
 * readings have it (a thread that started in between counts whole; one that ended in
 * between loses what it ran since `from`), else the tick-rounded utime+stime.
 */
export function cpuSpentMs(from: ProcCpu, to: ProcCpu): number {
  if (!from.threadsNs || !to.threadsNs) return to.userMs + to.sysMs - (from.userMs + from.sysMs);
  let ns = 0;
  for (const [tid, now] of to.threadsNs) ns += now - (from.threadsNs.get(tid) ?? 0);
  return ns / 1e6;
}

/** A reading before a process started: a delta from it is all the process has spent. */
export const NO_CPU: ProcCpu = { threadsNs: new Map(), userMs: 0, sysMs: 0, ioCalls: 0, minorFaults: 0 };

/** CPU ms a process has spent so far (see cpuSpentMs), or NaN when it is gone. */
export function cpuMs(pid: number): number {
  return cpuSpentMs(NO_CPU, readProcCpu(pid));
}

/** The child processes of `pid` now (none when it is gone), from /proc/<pid>/task/<tid>/children. */
export function childPids(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
      try {
        return readFileSync(`/proc/${pid}/task/${tid}/children`, "latin1").split(" ").filter(Boolean).map(Number);
      } catch {
        return [];
      }
    });
  } catch {
    return [];
  }
}

/**
 * The records streamers of the workers among `pids` (named worker-<i>), as streamer-<i>:
 * the child process running records-streamer-main that a worker keeps from when it is
 * ready (a worker run from source through tsx may also have esbuild's child).
 */
export function streamerPids(pids: Record<string, number>): Record<string, number> {
  const streamers: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    if (!name.startsWith("worker-")) continue;
    const child = childPids(pid).find((c) => commandLine(c).includes("records-streamer-main"));
    if (child !== undefined) streamers[name.replace("worker-", "streamer-")] = child;
  }
  return streamers;
}

/** A process's command line, arguments joined by NULs ("" when it is gone). */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1");
  } catch {
    return "";
  }
}

function statusKb(pid: number, key: string): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "latin1");
    const at = status.indexOf(`${key}:`);
    if (at < 0) return Number.NaN;
    return Number.parseInt(status.slice(at + key.length + 1), 10);
  } catch {
    return Number.NaN;
  }
}

const MIB = 1024;
/** Current resident set, MiB. */
export const rssMiB = (pid: number) => statusKb(pid, "VmRSS") / MIB;
/** Peak resident set since the process started (VmHWM), MiB. */
export const peakRssMiB = (pid: number) => statusKb(pid, "VmHWM") / MIB;

/** Proportional set size now (shared pages divided among their users), MiB; NaN when unreadable. */
export function pssMiB(pid: number): number {
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "latin1");
    const at = rollup.indexOf("\nPss:");
    return at < 0 ? Number.NaN : Number.parseInt(rollup.slice(at + 5), 10) / MIB;
  } catch {
    return Number.NaN;
  }
}

/** The machine's CPU time counters (the "cpu" line of /proc/stat, in ticks): all of it, and what the hypervisor stole. */
export interface MachineCpu {
  total: number;
  steal: number;
}

/** The machine's CPU counters now, or undefined where /proc/stat cannot be read. */
export function machineCpu(): MachineCpu | undefined {
  try {
    const line = readFileSync("/proc/stat", "latin1").split("\n", 1)[0]!;
    // user nice system idle iowait irq softirq steal (guest time is already in user and nice).
    const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
    if (ticks.length < 8 || !ticks.every(Number.isFinite)) return undefined;
    return { total: ticks.reduce((a, b) => a + b, 0), steal: ticks[7]! };
  } catch {
    return undefined;
  }
}

/**
 * The share of the machine's CPU time the hypervisor took (steal) between two readings,
 * e.g. "12%": on a virtual machine, time stolen by its neighbours slows every process
 * and moves every number a benchmark prints. "n/a" when unknown.
 */
export function stealShare(from: MachineCpu | undefined, to: MachineCpu | undefined = machineCpu()): string {
  if (!from || !to || to.total <= from.total) return "n/a";
  return `${((100 * (to.steal - from.steal)) / (to.total - from.total)).toFixed(0)}%`;
}

export type CpuSnapshot = Record<string, ProcCpu>;

/** The CPU counters of each named process now. */
export function cpuSnapshot(pids: Record<string, number>): CpuSnapshot {
  return Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, readProcCpu(pid)]));
}

/**
 * What each process spent between two snapshots: CPU ms (`total`), its system part (`sys`:
 * page faults, syscalls; in ticks), its read and write system calls (`ioCalls`, a count), or
 * its minor page faults (`minorFaults`, a count).
 */
export function cpuDelta(
  before: CpuSnapshot,
  after: CpuSnapshot,
  part: "total" | "sys" | "ioCalls" | "minorFaults" = "total",
): Record<string, number> {
  const spent = (from: ProcCpu, to: ProcCpu) =>
    part === "total" ? cpuSpentMs(from, to) : part === "sys" ? to.sysMs - from.sysMs : to[part] - from[part];
  return Object.fromEntries(Object.keys(before).map((name) => [name, spent(before[name], after[name])]));
}

export interface RssPeaks {
  /** Largest sampled sum over the group's processes (0 for an empty group), MiB. */
  group: number;
  /** Largest sum of the group's PSS, sampled every `pssEvery`-th time (and at the end), MiB. */
  groupPss: number;
  /** Largest sampled RSS of each process, MiB. */
  perProcess: Record<string, number>;
  samples: number;
}

/**
 * Samples VmRSS of a group of processes every `intervalMs` until stopped. The group peak
 * needs simultaneous samples (the per-process peaks need not coincide); a spike shorter
 * than the interval can be missed, which is why VmHWM is reported beside it. Every
 * `pssEvery`-th sample (and the last) also sums the group's PSS: reading it costs ~1 ms
 * per process, so at every sample it would take a share of the machine the workload needs.
 */
export class RssSampler {
  readonly #pids: Record<string, number>;
  readonly #group: Set<string>;
  readonly #timer: NodeJS.Timeout;
  readonly #peaks: RssPeaks;
  readonly #pssEvery: number;

  /** `group` names the processes whose simultaneous sum is tracked (default: all). */
  constructor(pids: Record<string, number>, group: string[] = Object.keys(pids), intervalMs = 50, pssEvery = 20) {
    this.#pids = pids;
    this.#group = new Set(group);
    this.#pssEvery = pssEvery;
    this.#peaks = {
      group: 0,
      groupPss: 0,
      perProcess: Object.fromEntries(Object.keys(pids).map((n) => [n, 0])),
      samples: 0,
    };
    this.sample(true);
    this.#timer = setInterval(() => this.sample(this.#peaks.samples % this.#pssEvery === 0), intervalMs);
  }

  sample(withPss = false): void {
    let sum = 0;
    let pss = 0;
    for (const [name, pid] of Object.entries(this.#pids)) {
      const rss = rssMiB(pid);
      if (!Number.isFinite(rss)) continue;
      if (this.#group.has(name)) {
        sum += rss;
        if (withPss) pss += pssMiB(pid) || 0;
      }
      if (rss > this.#peaks.perProcess[name]) this.#peaks.perProcess[name] = rss;
    }
    if (sum > this.#peaks.group) this.#peaks.group = sum;
    if (pss > this.#peaks.groupPss) this.#peaks.groupPss = pss;
    this.#peaks.samples++;
  }

  stop(): RssPeaks {
    clearInterval(this.#timer);
    this.sample(true);
    return this.#peaks;
  }
}
