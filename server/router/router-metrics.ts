// GET /metrics (Prometheus text): the router's own counters — requests by
// route and status, chat latency, in-flight requests, relayed bytes and records handoffs per shard, the
// tree's state and restarts, the rollout door's series (rollout-metrics.ts) — merged with
// every reachable worker's metrics, fetched over the transport. A shard that cannot
// answer in time is left out, never waited on long.
import type { FastifyInstance } from "fastify";
import { Counter, Gauge, Histogram, MetricSet } from "../protocol/metric-series.ts";
import { requestShard } from "../protocol/shard-protocol.ts";
import type { RouterStatus } from "./supervision-view.ts";
import type { ShardLinks } from "./shard-links.ts";
import type { RolloutDoor } from "./rollout-door.ts";
import { RolloutMetrics } from "./rollout-metrics.ts";

const WORKER_METRICS_TIMEOUT_MS = 2_000;
const WORKER_GC_METRICS_TIMEOUT_MS = 10_000;
const TREE_STATES = ["starting", "running", "failed", "stopping", "stopped"];

export class RouterMetrics {
  readonly set = new MetricSet();
  readonly requests: Counter;
  readonly chatLatency: Histogram;
  readonly inflight: Gauge;
  readonly relayedBytes: Counter;
  readonly handoffs: Counter;
  readonly authRefusals: Counter;
  readonly rollout: RolloutMetrics;

  constructor(status: RouterStatus, door?: RolloutDoor) {
    const set = this.set;
    this.rollout = new RolloutMetrics(set, () => door);
    this.requests = new Counter(set, {
      name: "tito_http_requests_total",
      help: "HTTP requests answered by the router, by route, method and status.",
      labelNames: ["route", "method", "status"],
    });
    this.chatLatency = new Histogram(set, {
      name: "tito_chat_latency_seconds",
      help: "Chat turn latency at the router (POST /sessions/:id/v1/chat/completions or /v1/messages), by status.",
      labelNames: ["status"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    });
    this.inflight = new Gauge(set, {
      name: "tito_inflight_requests",
      help: "Requests the router is relaying now, by shard.",
      labelNames: ["shard"],
    });
    this.relayedBytes = new Counter(set, {
      name: "tito_relayed_reply_bytes_total",
      help: "Reply body bytes relayed from workers to clients, by shard.",
      labelNames: ["shard"],
    });
    this.handoffs = new Counter(set, {
      name: "tito_records_handoffs_total",
      help: "Records GETs (GET /sessions/:id) whose client socket the router handed to the worker, which wrote the response itself; their bytes are not in tito_relayed_reply_bytes_total.",
      labelNames: ["shard"],
    });
    this.authRefusals = new Counter(set, {
      name: "tito_auth_refusals_total",
      help: "Requests refused at the front door, by route and status (401: no valid token; 403: a session token beyond its rights).",
      labelNames: ["route", "status"],
    });
    new Gauge(set, {
      name: "tito_tree_state",
      help: "1 for the supervision tree's current state.",
      labelNames: ["state"],
      collect: (g) => {
        for (const state of TREE_STATES) g.set({ state }, status.tree?.state === state ? 1 : 0);
      },
    });
    new Gauge(set, {
      name: "tito_child_restarts",
      help: "Restarts of each supervised child process since start.",
      labelNames: ["actor"],
      collect: (g) => {
        if (!status.tree) return;
        g.set({ actor: "router" }, status.tree.router.restarts);
        for (const shard of status.tree.shards) g.set({ actor: `shard-${shard.index}` }, shard.restarts);
      },
    });
  }
}

export async function metricsRoutes(
  app: FastifyInstance,
  opts: { links: ShardLinks; metrics: RouterMetrics },
): Promise<void> {
  const { links, metrics } = opts;

  // A callback hook (every request runs it): no promise per response.
  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url ?? "unmatched";
    metrics.requests.inc({ route, method: request.method, status: String(reply.statusCode) });
    if (route === "/sessions/:id/v1/chat/completions" || route === "/sessions/:id/v1/messages")
      metrics.chatLatency.observe({ status: String(reply.statusCode) }, reply.elapsedTime / 1000);
    done();
  });

  app.get("/metrics", async (request, reply) => {
    // ?gc=1 (memory benchmarks): every worker runs a full GC before it reads its memory,
    // which on a large heap takes longer than a plain scrape is given.
    const gc = (request.query as Record<string, unknown>).gc === "1";
    const signal = AbortSignal.timeout(gc ? WORKER_GC_METRICS_TIMEOUT_MS : WORKER_METRICS_TIMEOUT_MS);
    const fromWorkers = await Promise.allSettled(
      Array.from({ length: links.size }, async (_, shard) => {
        const channel = await links.acquire(shard, signal);
        const res = await requestShard(channel, { op: "metrics", gc }, undefined, signal);
        const chunks = await res.body.collect();
        return JSON.parse(Buffer.concat(chunks).toString("utf8"));
      }),
    );
    const all: unknown[][] = [metrics.set.json()];
    for (const r of fromWorkers) if (r.status === "fulfilled" && Array.isArray(r.value)) all.push(r.value);
    // prom-client renders the text: loaded on the first scrape, not at every router start.
    const { AggregatorRegistry } = await import("prom-client");
    const merged = AggregatorRegistry.aggregate(all as never);
    return reply.header("content-type", merged.contentType).send(await merged.metrics());
  });
}
