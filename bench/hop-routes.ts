// bench:hop's second part (issue 47): every route the router relays — chat, Anthropic
// messages, the session's engine proxy, records, samples — timed with each client of
// bench/hop-clients.ts (in-process undici, fetch in a child process, curl), against the
// same route's shard op sent straight to the worker's socket (no router) and against the
// bare topology (bench/bare-topology.ts) through its HTTP router and straight to its
// worker's socket. What the router adds on a route is `via router − straight to the
// worker`; the bare topology's `via its router − straight to its worker` is the floor of
// an HTTP front relaying over a Unix socket; the ratio of the two, at p50, is the target
// (≤ 1.3×). The route's worker work cancels out of both differences, so chat turns,
// whose worker renders and tokenizes, are held to the floor of a relay alone. The floor
// is of the route's own shape: the bare router relays the same method and request body,
// and its worker answers as many bytes as tito-server's reply on that route
// (bench/bare-topology.ts, `?reply=N`), so a POST's body and a bigger reply cost the floor
// what they cost the router. Beside the router's CPU per request is the worker's, straight
// and via the router: the op the router sends should cost the worker no more.
// Blocks of each leg alternate, so a shared machine's drift hits all of them alike.
import { request } from "undici";
import { shardOf, type ShardRequest } from "../server/protocol/shard-protocol.ts";
import { cpuMs } from "./rollout-proc-stats.ts";
import { fmt, summarize, type LatencySummary } from "./rollout-stats.ts";
import {
  bareWorkerClient,
  httpClient,
  listeningSocketOf,
  workerClient,
  type Call,
  type ClientKind,
  type HttpClient,
} from "./hop-clients.ts";

export type Route = "chat" | "messages" | "proxy" | "records" | "samples";
export const ROUTES: readonly Route[] = ["chat", "messages", "proxy", "records", "samples"];

const BLOCK = 50;
const CHAT_BODY = JSON.stringify({ model: "tito-sim", messages: [{ role: "user", content: "Hello there" }] });
const MESSAGES_BODY = JSON.stringify({
  model: "tito-sim",
  max_tokens: 16,
  messages: [{ role: "user", content: "Hello there" }],
});

export interface RouteRow {
  client: ClientKind;
  route: Route;
  viaRouter: LatencySummary;
  toWorker: LatencySummary;
  /** Router CPU µs per request on this route (/proc; one 10 ms tick over the leg's requests). */
  routerCpuUs: number;
  /** The route's worker's CPU µs per request: straight to its socket, and via the router. */
  workerCpuUs: { direct: number; via: number };
  /** The reply body's bytes on this route (the floor answers as many). */
  replyBytes: number;
  addedP50Us: number;
  /** The bare topology, same client: via its router, and straight to its worker. */
  bareViaRouter: LatencySummary;
  bareToWorker: LatencySummary;
  bareRouterCpuUs: number;
  bareAddedP50Us: number;
  /** addedP50Us / bareAddedP50Us: the target is at most 1.3. */
  ratio: number;
}

interface Setup {
  serverUrl: string;
  bareUrl: string;
  routerPid: number;
  /** Worker pid by shard index. */
  workerPids: number[];
  barePids: { router: number; worker: number };
}

async function created(url: string): Promise<string> {
  const res = await request(`${url}/sessions`, { method: "POST" });
  const { session_id } = (await res.body.json()) as { session_id: string };
  return session_id;
}

async function post(url: string, path: string, body: string): Promise<void> {
  const res = await request(url + path, { method: "POST", body, headers: { "content-type": "application/json" } });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`POST ${path}: ${res.statusCode} ${text}`);
}

/** The reply body's length of one `call` (after the routes' one turn each: what every timed call answers). */
async function replyBytes(url: string, call: Call): Promise<number> {
  const res = await request(url + call.path, {
    method: call.method,
    body: call.body,
    headers: call.body === undefined ? {} : { "content-type": "application/json" },
  });
  const bytes = Buffer.from(await res.body.arrayBuffer()).length;
  if (res.statusCode !== call.status) throw new Error(`${call.method} ${call.path}: ${res.statusCode}`);
  return bytes;
}

/** One session per route, each with one committed turn; the call each route's requests make and its shard op. */
async function routeCalls(url: string): Promise<Record<Route, { id: string; call: Call; op: ShardRequest }>> {
  const out = {} as Record<Route, { id: string; call: Call; op: ShardRequest }>;
  const headers = { host: "127.0.0.1", "content-type": "application/json" };
  for (const route of ROUTES) {
    const id = await created(url);
    // The same body again is a new turn in place of the last (docs/http.md, "Retries"): a
    // session of one turn, so every timed turn costs the same.
    // A session speaks one API: the messages route's is Anthropic's.
    if (route === "messages") await post(url, `/sessions/${id}/v1/messages`, MESSAGES_BODY);
    else await post(url, `/sessions/${id}/v1/chat/completions`, CHAT_BODY);
    const forward = (op: "chat" | "samples" | "proxy", method: string, path: string) =>
      ({ op, sessionId: id, method, path, query: "", headers }) as ShardRequest;
    if (route === "chat") {
      const call: Call = { method: "POST", path: `/sessions/${id}/v1/chat/completions`, body: CHAT_BODY, status: 200 };
      out.chat = { id, call, op: forward("chat", "POST", "/v1/chat/completions") };
    } else if (route === "messages") {
      const call: Call = { method: "POST", path: `/sessions/${id}/v1/messages`, body: MESSAGES_BODY, status: 200 };
      out.messages = { id, call, op: forward("chat", "POST", "/v1/messages") };
    } else if (route === "proxy") {
      const call: Call = { method: "GET", path: `/sessions/${id}/v1/models`, status: 200 };
      out.proxy = { id, call, op: forward("proxy", "GET", "/v1/models") };
    } else if (route === "records") {
      out.records = {
        id,
        call: { method: "GET", path: `/sessions/${id}`, status: 200 },
        op: { op: "get", sessionId: id },
      };
    } else {
      const call: Call = { method: "POST", path: `/sessions/${id}/samples`, body: "{}", status: 200 };
      out.samples = { id, call, op: forward("samples", "POST", "/samples") };
    }
  }
  return out;
}

/**
 * Every route with every client, `requests` of each leg, in alternating blocks after a
 * warm-up: `warmup` requests of each route through each router with the in-process client
 * (unmeasured), then one block of every leg. A router's per-request CPU on the chat route
 * settles only after a few thousand turns (V8 tiers up code that runs once a request late:
 * ~1,250 µs over the first 400, ~270 from ~3,600 on, docs/benchmark-history.md); the bare
 * router, a tenth of the code, gets the same count.
 */
export async function measureRoutes(
  setup: Setup,
  clients: readonly ClientKind[],
  requests: number,
  warmup = 0,
): Promise<RouteRow[]> {
  const calls = await routeCalls(setup.serverUrl);
  const n = setup.workerPids.length;
  const workers = await Promise.all(setup.workerPids.map((pid) => workerClient(listeningSocketOf(pid))));
  const bareWorker = await bareWorkerClient(listeningSocketOf(setup.barePids.worker));
  const tito = new Map<ClientKind, HttpClient>(clients.map((k) => [k, httpClient(k, setup.serverUrl)]));
  const bare = new Map<ClientKind, HttpClient>(clients.map((k) => [k, httpClient(k, setup.bareUrl)]));
  // Each route's floor: the same method and body through the bare router, answered with as many bytes.
  const bytes = {} as Record<Route, number>;
  const bareCalls = {} as Record<Route, Call>;
  for (const route of ROUTES) {
    const { call } = calls[route];
    bytes[route] = await replyBytes(setup.serverUrl, call);
    bareCalls[route] = { ...call, path: `/sessions/${calls.proxy.id}/v1/models?reply=${bytes[route]}`, status: 200 };
  }
  const lat = new Map<string, number[]>();
  const cpu = new Map<string, number>();
  const add = (key: string, values: number[], cpuUs = 0) => {
    lat.set(key, [...(lat.get(key) ?? []), ...values]);
    cpu.set(key, (cpu.get(key) ?? 0) + cpuUs);
  };
  const timedCpu = async (pids: number[], run: () => Promise<number[]>) => {
    const before = pids.map(cpuMs);
    const values = await run();
    return { values, cpuUs: pids.map((pid, i) => (cpuMs(pid) - before[i]!) * 1000) };
  };
  try {
    if (warmup > 0) {
      const warmers = [httpClient("inproc", setup.serverUrl), httpClient("inproc", setup.bareUrl)];
      try {
        for (const route of ROUTES)
          for (let sent = 0; sent < warmup; sent += BLOCK) {
            await warmers[0]!.block(calls[route].call, Math.min(BLOCK, warmup - sent));
            await warmers[1]!.block(bareCalls[route], Math.min(BLOCK, warmup - sent));
          }
      } finally {
        await Promise.all(warmers.map((c) => c.close()));
      }
    }
    const rounds = Math.max(1, Math.round(requests / BLOCK));
    for (let round = -1; round < rounds; round++) {
      const keep = round >= 0; // round -1 warms every leg up
      for (const route of ROUTES) {
        const { id, call, op } = calls[route];
        const shard = shardOf(id, n);
        const workerPid = setup.workerPids[shard]!;
        const body = call.body === undefined ? undefined : Buffer.from(call.body);
        const direct = await timedCpu([workerPid], () => workers[shard]!.block(op, body, 200, BLOCK));
        if (keep) add(`worker:${route}`, direct.values, direct.cpuUs[0]);
        for (const kind of clients) {
          const via = await timedCpu([setup.routerPid, workerPid], () => tito.get(kind)!.block(call, BLOCK));
          if (keep) add(`${kind}:${route}`, via.values, via.cpuUs[0]);
          if (keep) add(`${kind}:${route}:worker`, [], via.cpuUs[1]);
        }
        const bareCall = bareCalls[route];
        const socket = await bareWorker.block(bareCall.path.replace(/^\/sessions\/[^/]+/, ""), BLOCK, bareCall.body);
        if (keep) add(`bare-worker:${route}`, socket);
        for (const kind of clients) {
          const via = await timedCpu([setup.barePids.router], () => bare.get(kind)!.block(bareCall, BLOCK));
          if (keep) add(`bare:${kind}:${route}`, via.values, via.cpuUs[0]);
        }
      }
    }
  } finally {
    await Promise.all([...tito.values(), ...bare.values()].map((c) => c.close()));
    for (const w of workers) w.close();
    bareWorker.close();
  }
  const rows: RouteRow[] = [];
  for (const client of clients)
    for (const route of ROUTES) {
      const via = lat.get(`${client}:${route}`)!;
      const viaRouter = summarize(via);
      const toWorker = summarize(lat.get(`worker:${route}`)!);
      const addedP50Us = viaRouter.p50 - toWorker.p50;
      const bareVia = lat.get(`bare:${client}:${route}`)!;
      const bareViaRouter = summarize(bareVia);
      const bareToWorker = summarize(lat.get(`bare-worker:${route}`)!);
      const bareAddedP50Us = bareViaRouter.p50 - bareToWorker.p50;
      rows.push({
        client,
        route,
        viaRouter,
        toWorker,
        routerCpuUs: cpu.get(`${client}:${route}`)! / via.length,
        workerCpuUs: {
          direct: cpu.get(`worker:${route}`)! / lat.get(`worker:${route}`)!.length,
          via: cpu.get(`${client}:${route}:worker`)! / via.length,
        },
        replyBytes: bytes[route],
        addedP50Us,
        bareViaRouter,
        bareToWorker,
        bareRouterCpuUs: cpu.get(`bare:${client}:${route}`)! / bareVia.length,
        bareAddedP50Us,
        ratio: addedP50Us / bareAddedP50Us,
      });
    }
  return rows;
}

/** The every-route table's markdown lines (none when the part was left out). */
export function routesTable(rows: { workers: number; routes: RouteRow[] }[]): string[] {
  const lines: string[] = [];
  if (rows.some((r) => r.routes.length > 0))
    lines.push(
      "",
      "Every route: what the router adds (p50 via the router − p50 of the same shard op straight to the worker's socket) against the bare topology's (via its router − straight to its worker, the same method, request body and reply size), µs; router CPU µs per request, and the worker's straight · via the router:",
      "",
      "| workers | client | route | reply B | via router p50 / p99 | to the worker p50 | router adds | router CPU | worker CPU straight · via | bare via router p50 | bare to worker p50 | bare adds | bare router CPU | ratio (target ≤ 1.3) |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    );
  for (const r of rows)
    for (const x of r.routes)
      lines.push(
        `| ${r.workers} | ${x.client} | ${x.route} | ${x.replyBytes} | ${fmt(x.viaRouter.p50, 0)} / ${fmt(x.viaRouter.p99, 0)} | ${fmt(x.toWorker.p50, 0)} | ${fmt(x.addedP50Us, 0)} | ${fmt(x.routerCpuUs, 0)} | ${fmt(x.workerCpuUs.direct, 0)} · ${fmt(x.workerCpuUs.via, 0)} | ` +
          `${fmt(x.bareViaRouter.p50, 0)} | ${fmt(x.bareToWorker.p50, 0)} | ${fmt(x.bareAddedP50Us, 0)} | ${fmt(x.bareRouterCpuUs, 0)} | ${fmt(x.ratio, 2)} |`,
      );
  return lines;
}
