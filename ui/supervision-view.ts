// The supervision view (docs/viewer.md): the current tree's processes and their state (GET
// /supervision), and the event log (GET /supervision/events) as a timeline with one lane
// per actor, then as a table, newest first. Polled every 2 s while the view is open, asking
// only for the events after the last one seen.
import { getJson } from "./api.ts";
import { h } from "./dom.ts";
import type { ChildState, SupervisionEvent, Tree } from "./types.ts";

const POLL_MS = 2000;
const SVG = "http://www.w3.org/2000/svg";
/** The kinds the timeline draws, and their colours (the rest are grey). */
const KIND_COLOURS: Readonly<Record<string, string>> = {
  spawned: "#90a4ae",
  ready: "#2e7d32",
  exited: "#c62828",
  restarting: "#ef6c00",
  restarted: "#1565c0",
  escalated: "#6a1b9a",
  stopping: "#6d4c41",
  stopped: "#424242",
  paused: "#f9a825",
  resumed: "#00838f",
};

function proc(name: string, c: ChildState): HTMLElement {
  return h(
    "div",
    { class: "proc", "data-actor": name },
    h("div", {}, h("b", {}, name)),
    h("div", { class: `state state-${c.state}` }, c.state),
    h("div", { class: "mono" }, `pid ${c.pid ?? "—"}`),
    h("div", { "data-restarts": c.restarts }, `restarts ${c.restarts}`),
  );
}

function treeBox(tree: Tree): HTMLElement {
  return h(
    "div",
    { id: "tree" },
    h(
      "div",
      { class: "proc", "data-actor": "supervisor" },
      h("div", {}, h("b", {}, "supervisor (host)")),
      h("div", { class: `state state-${tree.state}` }, tree.state),
      h("div", { class: "mono" }, `pid ${tree.host_pid}`),
      tree.failure ? h("div", { class: "ev-exited" }, tree.failure) : null,
    ),
    h(
      "div",
      { class: "children" },
      proc("router", tree.router),
      ...tree.shards.map((s, i) => proc(`shard-${s.index ?? i}`, s)),
    ),
  );
}

function timeline(events: SupervisionEvent[], width: number): SVGSVGElement {
  const actors = [...new Set(events.map((e) => e.actor))].sort();
  const lane = 30;
  const left = 90;
  const height = Math.max(1, actors.length) * lane + 24;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(height));
  svg.setAttribute("id", "timeline");
  const el = (tag: string, attrs: Record<string, string | number>, text?: string) => {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    svg.appendChild(node);
    return node;
  };
  if (events.length === 0) return svg;
  const t0 = Date.parse(events[0]!.time);
  const t1 = Math.max(t0 + 1000, Date.parse(events.at(-1)!.time));
  const x = (t: string) => left + ((Date.parse(t) - t0) / (t1 - t0)) * (width - left - 20);
  actors.forEach((a, i) => {
    el("text", { x: 4, y: i * lane + 17, "font-size": 12 }, a);
    el("line", { x1: left, x2: width - 10, y1: i * lane + 13, y2: i * lane + 13, stroke: "#ddd" });
  });
  // Events close in time (an exit and its restart) would hide each other: a close one steps down and back.
  const lastX = new Map<string, number>();
  const step = new Map<string, number>();
  for (const e of events) {
    const cx = x(e.time);
    const close = cx - (lastX.get(e.actor) ?? -Infinity) < 12;
    step.set(e.actor, close ? ((step.get(e.actor) ?? 0) + 1) % 3 : 0);
    lastX.set(e.actor, cx);
    const y = actors.indexOf(e.actor) * lane + 13 + [0, 6, -6][step.get(e.actor)!]!;
    const dot = el("circle", { cx, cy: y, r: 5, fill: KIND_COLOURS[e.kind] ?? "#9e9e9e" });
    const title = document.createElementNS(SVG, "title");
    title.textContent = `#${e.seq} ${e.time} ${e.actor} ${e.kind} ${JSON.stringify(e.detail)}`;
    dot.appendChild(title);
  }
  const y = actors.length * lane + 16;
  el("text", { x: left, y, "font-size": 11, fill: "#666" }, new Date(t0).toLocaleTimeString());
  el("text", { x: width - 80, y, "font-size": 11, fill: "#666" }, new Date(t1).toLocaleTimeString());
  return svg;
}

function eventRow(e: SupervisionEvent): HTMLElement {
  return h(
    "tr",
    { class: `ev-${e.kind}`, "data-kind": e.kind, "data-actor": e.actor },
    h("td", { class: "num" }, e.seq),
    h("td", { class: "mono" }, e.time),
    h("td", {}, e.actor),
    h("td", {}, e.kind),
    h("td", { class: "mono" }, e.pid ?? "—"),
    h("td", { class: "mono" }, JSON.stringify(e.detail)),
  );
}

export async function supervisionView(root: HTMLElement): Promise<() => void> {
  const events: SupervisionEvent[] = [];
  const treeSlot = h("div");
  const lanes = h("div");
  const legend = h(
    "div",
    { class: "toolbar legend" },
    ...Object.entries(KIND_COLOURS).map(([kind, colour]) => h("span", { style: `color:${colour}` }, `● ${kind}`)),
  );
  const body = h("tbody");
  root.replaceChildren(
    h("h2", {}, "Process tree"),
    treeSlot,
    h("h2", {}, "Event log"),
    legend,
    lanes,
    h(
      "table",
      { id: "events" },
      h("thead", {}, h("tr", {}, ...["seq", "time", "actor", "kind", "pid", "detail"].map((c) => h("th", {}, c)))),
      body,
    ),
  );
  const refresh = async () => {
    const since = events.at(-1)?.seq ?? 0;
    const [tree, fresh] = await Promise.all([
      getJson<Tree>("supervision"),
      getJson<{ events: SupervisionEvent[] }>(`supervision/events?since=${since}`),
    ]);
    treeSlot.replaceChildren(treeBox(tree));
    if (fresh.events.length > 0 || events.length === 0) {
      events.push(...fresh.events);
      lanes.replaceChildren(timeline(events, Math.max(400, root.clientWidth - 20)));
      body.prepend(...fresh.events.map(eventRow).reverse());
    }
  };
  await refresh();
  const timer = setInterval(() => void refresh(), POLL_MS);
  return () => clearInterval(timer);
}
