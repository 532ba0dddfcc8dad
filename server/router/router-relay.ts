// Relays one request to the worker that owns its shard and the worker's reply back,
// unchanged: status, headers and body bytes are passed through, never parsed. A body
// the worker streams is written to the socket piece by piece (pipeBody). A chat turn
// passes the rollout door first (rollout-door.ts). A records GET whose worker kept the
// response for a handoff ticket is not relayed: the client's socket goes to that worker
// (records-handoff.ts). Failure mapping (docs/http.md): no live
// worker, or the worker died mid-request -> 503; held past --hold-timeout-ms -> 503 with
// Retry-After; the worker failed the request -> 502.
import type { FastifyReply, FastifyRequest } from "fastify";
import { ChannelClosedError, RequestAbortedError, release } from "../../transport/index.ts";
import { requestShard, type ShardRequest } from "../shard-protocol.ts";
import { HoldTimeoutError, WorkerFailedError, WorkerUnavailableError } from "./errors.ts";
import type { RolloutDoor } from "./rollout-door.ts";
import type { ShardLinks } from "./shard-links.ts";
import type { RouterMetrics } from "./router-metrics.ts";
import type { SocketHandoff } from "./records-handoff.ts";
import { drained } from "../../buffers/drained.ts";
import { Cancel } from "../../buffers/cancel.ts";
import { cutShort } from "../../buffers/cut-short.ts";

const JSON_TYPE = "application/json; charset=utf-8";
/** The Retry-After of a retryable 503 (a held turn that timed out, a turn a pause aborted). */
export const RETRY_AFTER_S = 1;

export function sendError(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply
    .code(status)
    .header("content-type", JSON_TYPE)
    .send(JSON.stringify({ error: message }));
}

export interface RelayOptions {
  metrics?: RouterMetrics;
  /** A reply the router writes itself instead of a whole (not streamed) one, or undefined to relay it (session creation). */
  rewrite?: (status: number) => { status: number; body: Buffer } | undefined;
  /** Chat turns: pass the rollout door first; the op carries the weight version it is sent under. */
  door?: RolloutDoor;
  /** A records GET whose op carries `ticket`: if the worker kept the response, hand it the socket. */
  handoff?: { via: SocketHandoff; ticket: string };
}

/** A retryable 503: the client should try the same request again later. */
export function sendRetryable(reply: FastifyReply, message: string): FastifyReply {
  return sendError(reply.header("retry-after", String(RETRY_AFTER_S)), 503, message);
}

export async function relay(
  links: ShardLinks,
  shard: number,
  request: FastifyRequest,
  reply: FastifyReply,
  shardRequest: ShardRequest,
  body?: Buffer,
  { metrics, rewrite, door, handoff }: RelayOptions = {},
): Promise<FastifyReply> {
  const label = { shard: String(shard) };
  reply.header("x-tito-shard", label.shard);
  metrics?.inflight.inc(label);
  const controller = new Cancel(); // not an AbortController: ~10 µs less per relayed request (buffers/cancel.ts)
  reply.raw.once("close", () => {
    metrics?.inflight.dec(label);
    // The client went away before we answered: cancel the worker's work and its reply.
    if (!reply.raw.writableFinished) controller.abort();
  });
  const turn = door?.enter(shard, controller.signal);
  let channel;
  let res;
  let whole: Buffer[] | undefined;
  try {
    // A turn held while paused, or sent back to the queue by a pause while its shard was
    // restarting, waits at the door again: nothing is sent while the door is closed.
    for (;;) {
      await turn?.ready();
      channel = await links.acquire(shard, controller.signal);
      if (turn === undefined || turn.state === "passed") break;
    }
  } catch (err) {
    if (turn) door!.finish(turn);
    if (err instanceof RequestAbortedError) return reply; // the client left while its turn was held
    if (err instanceof HoldTimeoutError) return sendRetryable(reply, err.message);
    request.log.warn({ shard, err: (err as WorkerUnavailableError).detail ?? String(err) }, "shard unavailable");
    return sendError(reply, 503, new WorkerUnavailableError(shard, "unavailable").message);
  }
  const sent = turn ? { ...shardRequest, weightVersion: door!.send(turn, channel) } : shardRequest;
  const answered = (t: NonNullable<typeof turn>, status: number) => {
    door!.finish(t);
    metrics?.rollout.turnAnswered(t.weightVersion, status);
  };
  try {
    res = await requestShard(channel, sent, body, controller.signal);
    // A streamed chat turn (`stream: true`) is in flight until its body is over: the engine
    // is still generating it, and the worker commits it only at the end.
    if (turn && !res.body.streaming) answered(turn, res.status);
    if (!res.body.streaming) whole = await res.body.collect();
  } catch (err) {
    if (turn) door!.finish(turn);
    if (err instanceof RequestAbortedError) return reply; // nobody is listening any more
    if (err instanceof ChannelClosedError) {
      request.log.warn({ shard }, "worker died with the request in flight");
      return sendError(reply, 503, new WorkerUnavailableError(shard, "worker exited").message);
    }
    return sendError(reply, 502, new WorkerFailedError((err as Error).message).message);
  }
  if (res.handoff) {
    // The worker kept the response (only ever for a ticket this router sent).
    if (handoff === undefined) return sendError(reply, 502, new WorkerFailedError("unasked records handoff").message);
    return handoff.via.handOff(reply, { shard, epoch: links.epochOf(channel), ticket: handoff.ticket }, metrics);
  }
  let { status } = res;
  const { headers } = res;
  if (whole) {
    let bytes: Buffer;
    if (whole.length === 1) {
      bytes = whole[0]!;
      // A view of the channel's read slab: the slab is reused once the response is out.
      onceDone(reply.raw, () => release(bytes));
    } else {
      bytes = Buffer.concat(whole);
      for (const piece of whole) release(piece);
    }
    const own = rewrite?.(status);
    if (own) {
      if (whole.length === 1) release(bytes);
      ({ status, body: bytes } = own);
      delete headers["content-length"];
    }
    metrics?.relayedBytes.inc(label, bytes.length);
    return reply.code(status).headers(headers).send(bytes);
  }
  return pipeBody(
    request,
    reply,
    status,
    headers,
    res.body,
    metrics === undefined ? undefined : (n) => metrics.relayedBytes.inc(label, n),
    turn && (() => answered(turn, status)),
  );
}

/** Runs `fn` once, when the response has been handed to the socket or was torn down. */
function onceDone(raw: NodeJS.WritableStream & { once(event: string, fn: () => void): unknown }, fn: () => void): void {
  let done = false;
  const run = () => {
    if (done) return;
    done = true;
    fn();
  };
  raw.once("finish", run);
  raw.once("close", run);
}

// A streamed body is written straight to the socket, piece by piece, with backpressure:
// no stream objects per piece, and each piece's read slab is released as soon as the
// socket has taken it. A body that fails midway (the worker died) cuts the response
// short with a reset (buffers/cut-short.ts), so the client sees an error, never a
// complete-looking wrong one, even where the body is close-delimited (HTTP/1.0).
async function pipeBody(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  headers: Record<string, string>,
  body: AsyncIterable<Buffer>,
  count: ((bytes: number) => void) | undefined,
  /** Runs once the body is over, however it ended. */
  onDone?: () => void,
): Promise<FastifyReply> {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(status, { ...(reply.getHeaders() as Record<string, string>), ...headers });
  // A length the worker promised (a records GET's) is held to: a body that ends short of it is cut.
  const promised = headers["content-length"] === undefined ? undefined : Number(headers["content-length"]);
  let sent = 0;
  try {
    for await (const piece of body) {
      count?.(piece.length);
      sent += piece.length;
      if (raw.destroyed) {
        release(piece);
        break;
      }
      if (!raw.write(piece, () => release(piece))) await drained(raw);
    }
    if (promised !== undefined && sent !== promised && !raw.destroyed)
      throw new Error(`${sent} bytes of the ${promised} promised`);
    raw.end();
  } catch (err) {
    if (!(err instanceof RequestAbortedError))
      request.log.warn({ err: (err as Error).message }, "relayed body failed midway");
    cutShort(raw.socket);
    raw.destroy();
  } finally {
    onDone?.();
  }
  return reply;
}
