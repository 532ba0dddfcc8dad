// What the soak measures, and how it judges growth. Samples each process's resident set
// (VmRSS) and open file descriptors (/proc/PID/fd) by role (host, router, shard-i,
// engine); a role whose pid changes (a killed worker) starts a new incarnation. After
// the run, a least-squares slope is fitted over the post-warm-up half: for a process that
// lived through it, over per-minute floors of RSS (the minimum, so a garbage collector's
// sawtooth does not read as growth; a leak raises the floor) and per-minute medians of
// fds; for a role that was killed again and again, over the values each incarnation had
// just before its end. Growth fails the run only when it goes on over the last half of
// that window too (Thresholds). It only reads /proc; it never signals anything.
import { readdirSync } from "node:fs";
import { rssMiB } from "./rollout-proc-stats.ts";

export interface Sample {
  /** Seconds since the start of the run. */
  t: number;
  pid: number;
  rssMiB: number;
  fds: number;
}

/** Open file descriptors of a process, NaN when it is gone. */
export function fdCount(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

export class SoakSampler {
  readonly series = new Map<string, Sample[]>();

  /** One sample of every role; a process that is gone (or not yet there) is skipped. */
  sample(t: number, pids: Record<string, number | null | undefined>): void {
    for (const [role, pid] of Object.entries(pids)) {
      if (!pid) continue;
      const rss = rssMiB(pid);
      const fds = fdCount(pid);
      if (!Number.isFinite(rss) || !Number.isFinite(fds)) continue;
      let list = this.series.get(role);
      if (!list) this.series.set(role, (list = []));
      list.push({ t, pid, rssMiB: rss, fds });
    }
  }
}

/** Least-squares slope of y over x (units of y per unit of x); 0 with fewer than two points. */
export function slope(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/**
 * A process grows when its slope after warm-up is above the rate AND the fitted line rises
 * by more than the minimum over the post-warm-up window (a short run's noise of one fd
 * or a few MiB extrapolates to a steep hourly rate without being growth).
 */
export interface Thresholds {
  /** Largest RSS slope after warm-up that passes, MiB per hour. */
  rssMiBPerHour: number;
  /** Rise of the fitted RSS line over the window that passes whatever the slope, MiB. */
  rssMinRiseMiB: number;
  /** Largest fd slope after warm-up that passes, fds per hour. */
  fdsPerHour: number;
  /** Rise of the fitted fd line over the window that passes whatever the slope. */
  fdsMinRise: number;
}

export interface RoleVerdict {
  role: string;
  /** "lived": one process through the post-warm-up half; "restarted": incarnation ends. */
  basis: "lived" | "restarted";
  incarnations: number;
  points: number;
  rssMiBPerHour: number;
  fdsPerHour: number;
  /** The same slopes over the last half of the post-warm-up window. */
  lateRssMiBPerHour: number;
  lateFdsPerHour: number;
  rssFirstMiB: number;
  rssLastMiB: number;
  fdsFirst: number;
  fdsLast: number;
  /** Fewer than 3 points in the last half of the window cannot show a trend: reported, not judged. */
  judged: boolean;
  pass: boolean;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

/** Per-bucket RSS floor and fd median of `samples`, bucketed by `bucketS` seconds. */
function buckets(samples: Sample[], bucketS: number): { t: number; rss: number; fds: number }[] {
  const by = new Map<number, Sample[]>();
  for (const s of samples) {
    const k = Math.floor(s.t / bucketS);
    const list = by.get(k) ?? [];
    list.push(s);
    by.set(k, list);
  }
  return [...by.values()].map((list) => ({
    t: median(list.map((s) => s.t)),
    rss: Math.min(...list.map((s) => s.rssMiB)),
    fds: median(list.map((s) => s.fds)),
  }));
}

/** Judges every role over samples at or after `fromS` (the warm-up's end). */
export function judge(sampler: SoakSampler, fromS: number, limits: Thresholds, bucketS = 60): RoleVerdict[] {
  const out: RoleVerdict[] = [];
  for (const [role, all] of sampler.series) {
    const incarnations = new Set(all.map((s) => s.pid)).size;
    const after = all.filter((s) => s.t >= fromS);
    if (after.length === 0) continue;
    const lived = new Set(after.map((s) => s.pid)).size === 1 && all[0]!.pid === after[0]!.pid;
    let points: { t: number; rss: number; fds: number }[];
    if (lived) {
      points = buckets(after, bucketS);
    } else {
      // The last sample of each incarnation that ended after the warm-up (the live one excluded).
      points = [];
      for (let i = 0; i < after.length - 1; i++)
        if (after[i + 1]!.pid !== after[i]!.pid)
          points.push({ t: after[i]!.t, rss: after[i]!.rssMiB, fds: after[i]!.fds });
    }
    type Point = { t: number; rss: number; fds: number };
    const perHour = (list: Point[], pick: (p: Point) => number) =>
      slope(list.map((p) => ({ x: p.t / 3600, y: pick(p) })));
    const rssMiBPerHour = perHour(points, (p) => p.rss);
    const fdsPerHour = perHour(points, (p) => p.fds);
    // "Keeps growing": over the whole post-warm-up half, and still over its last half. A
    // step up that then stays flat (the machine's other load fell, so throughput and the
    // heaps' working sets rose) fails only the first.
    const mid = (after[0]!.t + after.at(-1)!.t) / 2;
    const late = points.filter((p) => p.t >= mid);
    const lateRssMiBPerHour = perHour(late, (p) => p.rss);
    const lateFdsPerHour = perHour(late, (p) => p.fds);
    const windowH = (after.at(-1)!.t - after[0]!.t) / 3600;
    const grows = (rate: number, lateRate: number, limit: number, minRise: number) =>
      rate > limit && rate * windowH > minRise && lateRate > limit && lateRate * (windowH / 2) > minRise / 2;
    const rssGrows = grows(rssMiBPerHour, lateRssMiBPerHour, limits.rssMiBPerHour, limits.rssMinRiseMiB);
    const fdsGrow = grows(fdsPerHour, lateFdsPerHour, limits.fdsPerHour, limits.fdsMinRise);
    out.push({
      role,
      basis: lived ? "lived" : "restarted",
      incarnations,
      points: points.length,
      rssMiBPerHour,
      fdsPerHour,
      lateRssMiBPerHour,
      lateFdsPerHour,
      rssFirstMiB: after[0]!.rssMiB,
      rssLastMiB: after.at(-1)!.rssMiB,
      fdsFirst: after[0]!.fds,
      fdsLast: after.at(-1)!.fds,
      judged: late.length >= 3,
      pass: late.length < 3 || !(rssGrows || fdsGrow),
    });
  }
  return out;
}
