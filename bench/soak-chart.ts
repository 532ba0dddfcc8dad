// A hand-written SVG chart of the soak (bench/soak.ts), in the manner of rollout-chart.ts:
// left, each process's resident set over time; right, its open file descriptors; one
// line per role (a killed worker's incarnations joined), the end of warm-up dashed, and
// each role's post-warm-up slope (and that of its last half) in the legend. No
// dependency, no measuring.
import type { RoleVerdict, Sample } from "./soak-sampler.ts";

const W = 1060;
const H = 470;
const PAD = { top: 112, bottom: 56, left: 64 };
const PANEL = 420;
const GAP = 110;
const COLORS = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4d7c0f", "#6b7280"];

const esc = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
const text = (x: number, y: number, s: string, attrs = "") =>
  `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${esc(s)}</text>`;

function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= value) ?? 10 * p;
}

function panel(
  title: string,
  series: [string, Sample[]][],
  pick: (s: Sample) => number,
  x0: number,
  endS: number,
  warmupS: number,
): string[] {
  const plotH = H - PAD.top - PAD.bottom;
  const maxY = niceMax(Math.max(1, ...series.flatMap(([, list]) => list.map(pick))));
  const xOf = (t: number) => x0 + (t / Math.max(endS, 1)) * PANEL;
  const yOf = (v: number) => PAD.top + plotH - (v / maxY) * plotH;
  const out = [text(x0, PAD.top - 12, title, 'font-weight="bold"')];
  for (let i = 0; i <= 4; i++) {
    const y = yOf((maxY * i) / 4);
    out.push(`<line x1="${x0}" x2="${x0 + PANEL}" y1="${y}" y2="${y}" stroke="#e5e7eb"/>`);
    out.push(text(x0 - 8, y + 4, String(+((maxY * i) / 4).toPrecision(3)), 'text-anchor="end"'));
  }
  const minutes = endS / 60;
  const step = niceMax(minutes / 6);
  for (let m = 0; m <= minutes + 1e-9; m += step)
    out.push(text(xOf(m * 60), PAD.top + plotH + 18, `${+m.toPrecision(3)}`, 'text-anchor="middle"'));
  out.push(text(x0 + PANEL / 2, PAD.top + plotH + 36, "minutes", 'text-anchor="middle"'));
  const wx = xOf(warmupS).toFixed(1);
  out.push(
    `<line x1="${wx}" x2="${wx}" y1="${PAD.top}" y2="${PAD.top + plotH}" stroke="#111" stroke-dasharray="4 4"/>`,
  );
  out.push(text(xOf(warmupS) + 4, PAD.top + 12, "warm-up ends", 'font-size="10"'));
  series.forEach(([, list], i) => {
    const points = list.map((s) => `${xOf(s.t).toFixed(1)},${yOf(pick(s)).toFixed(1)}`);
    out.push(
      `<polyline points="${points.join(" ")}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.5"/>`,
    );
  });
  out.push(`<line x1="${x0}" x2="${x0 + PANEL}" y1="${PAD.top + plotH}" y2="${PAD.top + plotH}" stroke="#111"/>`);
  return out;
}

function legend(series: [string, Sample[]][], verdicts: RoleVerdict[]): string[] {
  return series.map(([role], i) => {
    const v = verdicts.find((x) => x.role === role);
    const x = PAD.left + (i % 4) * 240;
    const y = 58 + Math.floor(i / 4) * 16;
    const detail = v
      ? ` ${v.rssMiBPerHour.toFixed(0)} (${v.lateRssMiBPerHour.toFixed(0)}) MiB/h, ${v.fdsPerHour.toFixed(1)} (${v.lateFdsPerHour.toFixed(1)}) fd/h${v.basis === "restarted" ? " per life" : ""}${v.pass ? "" : " FAIL"}`
      : "";
    return [
      `<rect x="${x}" y="${y - 10}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`,
      text(x + 18, y, `${role}${detail}`, 'font-size="11"'),
    ].join("");
  });
}

export function soakChartSvg(
  title: string,
  subtitle: string,
  series: Map<string, Sample[]>,
  verdicts: RoleVerdict[],
  endS: number,
  warmupS: number,
): string {
  const list = [...series.entries()];
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    text(PAD.left, 22, title, 'font-size="15" font-weight="bold"'),
    text(PAD.left, 38, subtitle, 'font-size="10" fill="#374151"'),
    ...legend(list, verdicts),
    ...panel("Resident set (MiB)", list, (s) => s.rssMiB, PAD.left, endS, warmupS),
    ...panel("Open file descriptors", list, (s) => s.fds, PAD.left + PANEL + GAP, endS, warmupS),
    "</svg>",
    "",
  ].join("\n");
}
