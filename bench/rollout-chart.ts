// A hand-written SVG chart of the rollout benchmark: left, throughput (bars) and chat
// p99 (dots, right axis) per run label — floor, w1, w2, …; right, the chat latency
// distribution (CDF, log-scale ms) of every label. No dependency, no measuring.
import type { LabelSummary } from "./rollout-report.ts";
import type { RunResult } from "./rollout-run.ts";

const W = 1060;
const H = 430;
const PAD = { top: 90, right: 56, bottom: 56, left: 64 };
const PANEL = 420; // width of each panel's plot area
const GAP = 110;
const COLORS = ["#6b7280", "#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4d7c0f"];

const esc = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least `value`. */
function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= value) ?? 10 * p;
}

function text(x: number, y: number, s: string, attrs = ""): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${esc(s)}</text>`;
}

function throughputPanel(labels: LabelSummary[], x0: number): string[] {
  const plotH = H - PAD.top - PAD.bottom;
  const maxT = niceMax(Math.max(...labels.map((l) => l.turnsPerSec)));
  const maxP = niceMax(Math.max(...labels.map((l) => l.chatP99)));
  const slot = PANEL / labels.length;
  const out = [
    text(x0, PAD.top - 16, "Throughput (turns/s, bars, left) and chat p99 (ms, red dots, right)", 'font-weight="bold"'),
  ];
  for (let i = 0; i <= 4; i++) {
    const y = PAD.top + plotH - (i / 4) * plotH;
    out.push(`<line x1="${x0}" x2="${x0 + PANEL}" y1="${y}" y2="${y}" stroke="#e5e7eb"/>`);
    out.push(text(x0 - 8, y + 4, String(+((maxT * i) / 4).toPrecision(3)), 'text-anchor="end"'));
    out.push(text(x0 + PANEL + 8, y + 4, String(+((maxP * i) / 4).toPrecision(3)), 'fill="#dc2626"'));
  }
  labels.forEach((l, i) => {
    const h = (l.turnsPerSec / maxT) * plotH;
    const x = x0 + i * slot + slot * 0.2;
    const cx = x0 + i * slot + slot / 2;
    out.push(
      `<rect x="${x.toFixed(1)}" y="${(PAD.top + plotH - h).toFixed(1)}" width="${(slot * 0.6).toFixed(1)}" height="${h.toFixed(1)}" fill="${COLORS[i % COLORS.length]}"/>`,
    );
    out.push(text(cx, PAD.top + plotH - h - 6, l.turnsPerSec.toFixed(1), 'text-anchor="middle"'));
    out.push(text(cx, PAD.top + plotH + 18, l.label, 'text-anchor="middle"'));
    const py = PAD.top + plotH - (l.chatP99 / maxP) * plotH;
    out.push(`<circle cx="${cx.toFixed(1)}" cy="${py.toFixed(1)}" r="5" fill="#dc2626" stroke="white"/>`);
  });
  out.push(`<line x1="${x0}" x2="${x0 + PANEL}" y1="${PAD.top + plotH}" y2="${PAD.top + plotH}" stroke="#111"/>`);
  return out;
}

function cdfPanel(labels: LabelSummary[], runs: RunResult[], x0: number): string[] {
  const plotH = H - PAD.top - PAD.bottom;
  const series = labels.map((l) =>
    runs
      .filter((r) => r.label === l.label)
      .flatMap((r) => r.chatMs)
      .sort((a, b) => a - b),
  );
  const all = series.flat().filter((v) => v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.min(...all)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...all)));
  const xOf = (ms: number) =>
    x0 + ((Math.log10(Math.max(ms, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * PANEL;
  const yOf = (q: number) => PAD.top + plotH - q * plotH;
  const out = [text(x0, PAD.top - 16, "Chat latency distribution (CDF, ms, log scale)", 'font-weight="bold"')];
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    out.push(
      `<line x1="${xOf(d).toFixed(1)}" x2="${xOf(d).toFixed(1)}" y1="${PAD.top}" y2="${PAD.top + plotH}" stroke="#e5e7eb"/>`,
    );
    out.push(text(xOf(d), PAD.top + plotH + 18, String(+d.toPrecision(3)), 'text-anchor="middle"'));
  }
  // p95 and p100 sit too close to p99 to label; their grid lines would only add clutter.
  for (const q of [0, 0.5, 0.9, 0.99]) {
    out.push(`<line x1="${x0}" x2="${x0 + PANEL}" y1="${yOf(q)}" y2="${yOf(q)}" stroke="#e5e7eb"/>`);
    out.push(text(x0 - 8, yOf(q) + 4, `p${Math.round(q * 100)}`, 'text-anchor="end"'));
  }
  series.forEach((values, i) => {
    if (values.length === 0) return;
    const points = values.map((v, k) => `${xOf(v).toFixed(1)},${yOf((k + 1) / values.length).toFixed(1)}`);
    points.unshift(`${xOf(values[0]).toFixed(1)},${yOf(0).toFixed(1)}`);
    out.push(
      `<polyline points="${points.join(" ")}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2"/>`,
    );
    // Legend top-left: high quantiles at low latency never happen, so that corner stays empty.
    const ly = PAD.top + 16 + i * 18;
    out.push(`<rect x="${x0 + 10}" y="${ly - 10}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`);
    out.push(text(x0 + 28, ly, `${labels[i].label} (p50 ${labels[i].chatP50.toFixed(2)} ms)`));
  });
  out.push(`<line x1="${x0}" x2="${x0 + PANEL}" y1="${PAD.top + plotH}" y2="${PAD.top + plotH}" stroke="#111"/>`);
  return out;
}

/** Breaks a long configuration line at ", " so each piece fits the chart's width. */
function wrap(line: string, maxChars: number): string[] {
  const out: string[] = [];
  let current = "";
  for (const part of line.split(/(?<=, )|(?= — )/)) {
    if (current && (current + part).length > maxChars) {
      out.push(current.trimEnd());
      current = part.replace(/^ — /, "");
    } else current += part;
  }
  if (current) out.push(current.trimEnd());
  return out;
}

/** `subtitle` is the run's configuration (small; wrapped onto at most three lines). */
export function chartSvg(title: string, subtitle: string, labels: LabelSummary[], runs: RunResult[]): string {
  const left = PAD.left;
  const right = PAD.left + PANEL + GAP;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    text(left, 22, title, 'font-size="15" font-weight="bold"'),
    ...wrap(subtitle, 150)
      .slice(0, 3)
      .map((line, i) => text(left, 40 + i * 13, line, 'font-size="10" fill="#374151"')),
    ...throughputPanel(labels, left),
    ...cdfPanel(labels, runs, right),
    "</svg>",
    "",
  ].join("\n");
}
