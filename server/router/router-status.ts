// Health and supervision routes of the router. The tree and the event log live in the
// host; the host pushes them here over IPC (RouterStatus), so these routes never wait
// on the host. /health also asks every worker, each within a few seconds.
import type { FastifyInstance } from "fastify";
import { requestShard } from "../protocol/shard-protocol.ts";
import { TreeUnknownError, UnhealthyError } from "./errors.ts";
import type { ShardLinks } from "./shard-links.ts";
import type { RouterStatus } from "./supervision-view.ts";

const HEALTH_TIMEOUT_MS = 3_000;

export async function statusRoutes(
  app: FastifyInstance,
  opts: { links: ShardLinks; status: RouterStatus },
): Promise<void> {
  const { links, status } = opts;

  app.get("/health", async (_request, reply) => {
    if (status.tree?.state !== "running") throw new UnhealthyError();
    const signal = AbortSignal.timeout(HEALTH_TIMEOUT_MS);
    const checks = Array.from({ length: links.size }, async (_, shard) => {
      const channel = await links.acquire(shard, signal);
      const res = await requestShard(channel, { op: "health" }, undefined, signal);
      await res.body.collect();
      return res.status === 200;
    });
    const results = await Promise.allSettled(checks);
    if (!results.every((r) => r.status === "fulfilled" && r.value)) throw new UnhealthyError();
    return reply.send({ status: "ok", session_server_instance_id: status.instanceId });
  });

  app.get("/supervision", async (_request, reply) => {
    if (!status.tree) throw new TreeUnknownError();
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
