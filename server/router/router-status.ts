// Health and supervision routes of the router. The tree and the event log live in the
// host; the host pushes them here over IPC (RouterStatus), so these routes never wait
// on the host. /health also asks every worker, each within a few seconds.
import type { FastifyInstance } from "fastify";
import type { SupervisionEvent, TreeSnapshot } from "../../actors/index.ts";
import { requestShard } from "../shard-protocol.ts";
import { sendError } from "./router-relay.ts";
import type { ShardLinks } from "./shard-links.ts";

export interface RouterStatus {
  instanceId: string;
  tree: TreeSnapshot | null;
  events: SupervisionEvent[];
}

const HEALTH_TIMEOUT_MS = 3_000;
const MAX_EVENTS = 10_000;

export function addEvents(status: RouterStatus, events: SupervisionEvent[]): void {
  const last = status.events.at(-1)?.seq ?? 0;
  for (const event of events) if (event.seq > last) status.events.push(event);
  if (status.events.length > MAX_EVENTS) status.events.splice(0, status.events.length - MAX_EVENTS);
}

export async function statusRoutes(
  app: FastifyInstance,
  opts: { links: ShardLinks; status: RouterStatus },
): Promise<void> {
  const { links, status } = opts;

  app.get("/health", async (_request, reply) => {
    const unhealthy = () => sendError(reply, 503, "one or more session workers unhealthy");
    if (status.tree?.state !== "running") return unhealthy();
    const signal = AbortSignal.timeout(HEALTH_TIMEOUT_MS);
    const checks = Array.from({ length: links.size }, async (_, shard) => {
      const channel = await links.acquire(shard, signal);
      const res = await requestShard(channel, { op: "health" }, undefined, signal);
      await res.body.collect();
      return res.status === 200;
    });
    const results = await Promise.allSettled(checks);
    if (!results.every((r) => r.status === "fulfilled" && r.value)) return unhealthy();
    return reply.send({ status: "ok", session_server_instance_id: status.instanceId });
  });

  app.get("/supervision", async (_request, reply) => {
    if (!status.tree) return sendError(reply, 503, "supervision tree not known yet");
    return reply.send(status.tree);
  });

  app.get<{ Querystring: { since?: string } }>(
    "/supervision/events",
    {
      schema: {
        querystring: { type: "object", properties: { since: { type: "integer", minimum: 0 } } },
      },
    },
    async (request, reply) => {
      const since = Number(request.query.since ?? 0);
      return reply.send({ events: status.events.filter((e) => e.seq > since) });
    },
  );
}
