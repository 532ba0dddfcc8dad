// The rollout view (docs/viewer.md): the rollout door (GET /admin/rollout: running or paused,
// weight version, held and in-flight turns) and a live chart of chat turns per second and
// their p50/p99 latency, computed from the server's own `tito_chat_latency_seconds`
// histogram (GET /metrics) as the difference between two scrapes. Polled every 2 s while the
// view is open; a scrape asks every worker too (docs/http.md, GET /metrics), so nothing polls
// when the view is closed.
import { getJson, request } from "./api.ts";
import { h } from "./dom.ts";
import type { RolloutState } from "./types.ts";

const POLL_MS = 2000;
const POINTS = 150;

/** The chat latency histogram of one scrape, summed over its status labels: bucket bound → cumulative count. */
export interface Histogram {
  buckets: Map<number, number>;
  count: number;
}

export function parseChatLatency(text: string): Histogram {
  const buckets = new Map<number, number>();
  let count = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("tito_chat_latency_seconds_bucket{")) {
      const le = /le="([^"]+)"/.exec(line)?.[1];
      const value = Number(line.slice(line.lastIndexOf(" ") + 1));
      if (le === undefined || !Number.isFinite(value)) continue;
      const bound = le === "+Inf" ? Infinity : Number(le);
      buckets.set(bound, (buckets.get(bound) ?? 0) + value);
    } else if (line.startsWith("tito_chat_latency_seconds_count")) {
      count += Number(line.slice(line.lastIndexOf(" ") + 1)) || 0;
    }
  }
  return { buckets, count };
}

/** The q-quantile of the turns between two scrapes, interpolated inside its bucket; null without turns. */
export function quantile(before: Histogram, after: Histogram, q: number): number | null {
  const bounds = [...after.buckets.keys()].sort((a, b) => a - b);
  const total = after.count - before.count;
  if (total <= 0) return null;
  let lower = 0;
  let below = 0;
  for (const bound of bounds) {
    const cumulative = (after.buckets.get(bound) ?? 0) - (before.buckets.get(bound) ?? 0);
    if (cumulative >= q * total) {
      if (bound === Infinity) return lower;
      const inBucket = cumulative - below;
      return inBucket <= 0 ? bound : lower + ((q * total - below) / inBucket) * (bound - lower);
    }
    lower = bound;
    below = cumulative;
  }
  return lower;
}

interface Point {
  at: number;
  rate: number;
  p50: number | null;
  p99: number | null;
}

function draw(canvas: HTMLCanvasElement, points: Point[]): void {
  const ctx = canvas.getContext("2d")!;
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  const pad = 40;
  const top = 56;
  const plot = (values: (number | null)[], colour: string, max: number, label: string, row: number) => {
    ctx.strokeStyle = colour;
    ctx.fillStyle = colour;
    ctx.beginPath();
    let started = false;
    values.forEach((v, i) => {
      if (v === null) return void (started = false);
      // The newest point at the right edge; the chart fills leftwards as points come.
      const x = width - pad - ((values.length - 1 - i) / (POINTS - 1)) * (width - 2 * pad);
      const y = height - pad - (v / max) * (height - top - pad);
      if (started) ctx.lineTo(x, y);
      else {
        ctx.moveTo(x, y);
        started = true;
      }
      ctx.fillRect(x - 2, y - 2, 4, 4);
    });
    ctx.stroke();
    ctx.fillText(label, pad + 4, 14 + 14 * row);
  };
  ctx.font = "12px system-ui, sans-serif";
  ctx.strokeStyle = "#ccc";
  ctx.strokeRect(pad, top, width - 2 * pad, height - top - pad);
  const maxRate = Math.max(1, ...points.map((p) => p.rate));
  const latencies = points.flatMap((p) => [p.p50 ?? 0, p.p99 ?? 0]);
  const maxLatency = Math.max(0.001, ...latencies);
  const last = points.at(-1);
  const ms = (v: number | null | undefined) => (v === null || v === undefined ? "—" : `${(v * 1000).toFixed(1)} ms`);
  plot(
    points.map((p) => p.rate),
    "#1565c0",
    maxRate,
    `turns/s ${last?.rate.toFixed(2) ?? "—"} (max ${maxRate.toFixed(1)})`,
    0,
  );
  plot(
    points.map((p) => p.p50),
    "#2e7d32",
    maxLatency,
    `p50 ${ms(last?.p50)}`,
    1,
  );
  plot(
    points.map((p) => p.p99),
    "#c62828",
    maxLatency,
    `p99 ${ms(last?.p99)} (latency axis max ${ms(maxLatency)})`,
    2,
  );
}

export async function rolloutView(root: HTMLElement): Promise<() => void> {
  const door = h("div", { class: "facts", id: "door" });
  const turns = h("div", { class: "facts", id: "turns-facts" });
  const canvas = h("canvas", { id: "rollout-chart", width: 900, height: 300 });
  root.replaceChildren(
    h("h2", {}, "Rollout door"),
    door,
    h("h2", {}, "Chat turns (from GET /metrics, every 2 s)"),
    turns,
    canvas,
  );
  const points: Point[] = [];
  let previous: { at: number; histogram: Histogram } | undefined;
  let first: Histogram | undefined;
  const fact = (label: string, value: string | number, name: string) =>
    h("div", {}, h("span", {}, label), h("b", { "data-fact": name }, String(value)));
  const ms = (v: number | null | undefined) => (v === null || v === undefined ? "—" : `${(v * 1000).toFixed(1)} ms`);
  const refresh = async () => {
    const [state, metrics] = await Promise.all([
      getJson<RolloutState>("admin/rollout"),
      request("metrics").then((r) => r.text()),
    ]);
    door.replaceChildren(
      fact("door", state.state, "state"),
      fact("weight version", state.weight_version ?? "none", "weight_version"),
      fact("held turns", state.held, "held"),
      fact("in-flight turns", state.in_flight, "in_flight"),
    );
    const now = { at: performance.now(), histogram: parseChatLatency(metrics) };
    if (previous) {
      const seconds = (now.at - previous.at) / 1000;
      points.push({
        at: now.at,
        rate: Math.max(0, now.histogram.count - previous.histogram.count) / seconds,
        p50: quantile(previous.histogram, now.histogram, 0.5),
        p99: quantile(previous.histogram, now.histogram, 0.99),
      });
      if (points.length > POINTS) points.shift();
    }
    previous = now;
    first ??= now.histogram;
    const last = points.at(-1);
    turns.replaceChildren(
      fact("turns since this view opened", now.histogram.count - first.count, "turns_seen"),
      fact("turns/s", last ? last.rate.toFixed(2) : "—", "rate"),
      fact("p50", ms(last?.p50), "p50"),
      fact("p99", ms(last?.p99), "p99"),
    );
    draw(canvas, points);
    canvas.dataset.points = String(points.length);
  };
  await refresh();
  const timer = setInterval(() => void refresh(), POLL_MS);
  return () => clearInterval(timer);
}
