// Health and supervision routes of the router. The tree and the event log live in the
// host; the host pushes them here over IPC (RouterStatus), so these routes never wait
// on the host. /health also asks every worker, each within a few seconds.
import type { FastifyInstance } from "fastify";
import { requestShard } from "../protocol/shard-protocol.ts";
import { BadRequestError, TreeUnknownError, UnhealthyError } from "./errors.ts";
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

  app.get<{ Querystring: { since?: string | string[] } }>("/supervision/events", async (request, reply) => {
    const since = sinceOf(request.query.since);
    return reply.send({ events: status.events.filter((e) => e.seq > since) });
  });
}

/**
 * The `since` query value: absent is 0; else one non-negative integer in decimal. Checked
 * here, not by a route schema: the router's only schema made every router start compile
 * Ajv's meta-schema (~80 ms of a ~0.5 s start).
 */
function sinceOf(raw: string | string[] | undefined): number {
  if (raw === undefined) return 0;
  const since = typeof raw === "string" && /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(since)) throw new BadRequestError(400, "querystring/since must be integer");
  return since;
}
