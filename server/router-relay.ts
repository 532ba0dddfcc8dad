// Relays one request to the worker that owns its shard and the worker's reply back,
// unchanged: status, headers and body bytes are passed through, never parsed. A body
// the worker streams is piped chunk by chunk. Failure mapping (CONTRACT.md): no live
// worker, or the worker died mid-request -> 503; the worker failed the request -> 502.
import { Readable } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import { ChannelClosedError, RequestAbortedError, type Meta } from "../transport/index.ts";
import { WorkerFailedError, WorkerUnavailableError } from "./errors.ts";
import type { ShardLinks } from "./shard-links.ts";
import type { RouterMetrics } from "./router-metrics.ts";

const JSON_TYPE = "application/json; charset=utf-8";

async function* counted(body: AsyncIterable<Buffer>, add: (bytes: number) => void): AsyncGenerator<Buffer> {
  for await (const chunk of body) {
    add(chunk.length);
    yield chunk;
  }
}

export function sendError(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply.code(status).header("content-type", JSON_TYPE).send(JSON.stringify({ error: message }));
}

export async function relay(
  links: ShardLinks,
  shard: number,
  request: FastifyRequest,
  reply: FastifyReply,
  meta: Meta,
  body?: Buffer,
  metrics?: RouterMetrics,
): Promise<FastifyReply> {
  const label = { shard: String(shard) };
  reply.header("x-tito-shard", label.shard);
  metrics?.inflight.inc(label);
  const controller = new AbortController();
  reply.raw.once("close", () => {
    metrics?.inflight.dec(label);
    // The client went away before we answered: cancel the worker's work and its reply.
    if (!reply.raw.writableFinished) controller.abort();
  });
  let channel;
  try {
    channel = await links.acquire(shard, controller.signal);
  } catch (err) {
    request.log.warn({ shard, err: (err as WorkerUnavailableError).detail ?? String(err) }, "shard unavailable");
    return sendError(reply, 503, new WorkerUnavailableError(shard, "unavailable").message);
  }
  let res;
  let whole: Buffer[] | undefined;
  try {
    res = await channel.request(meta, body, { signal: controller.signal });
    if (!res.body.streaming) whole = await res.body.collect();
  } catch (err) {
    if (err instanceof RequestAbortedError) return reply; // nobody is listening any more
    if (err instanceof ChannelClosedError) {
      request.log.warn({ shard }, "worker died with the request in flight");
      return sendError(reply, 503, new WorkerUnavailableError(shard, "worker exited").message);
    }
    return sendError(reply, 502, new WorkerFailedError((err as Error).message).message);
  }
  const status = Number(res.meta.status) || 502;
  const headers = (res.meta.headers ?? {}) as Record<string, string>;
  reply.code(status).headers(headers);
  if (whole) {
    const bytes = whole.length === 1 ? whole[0] : Buffer.concat(whole);
    metrics?.relayedBytes.inc(label, bytes.length);
    return reply.send(bytes);
  }
  return reply.send(Readable.from(metrics ? counted(res.body, (n) => metrics.relayedBytes.inc(label, n)) : res.body));
}
