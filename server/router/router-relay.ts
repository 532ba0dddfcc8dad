// Relays one request to the worker that owns its shard and the worker's reply back,
// unchanged: status, headers and body bytes are passed through, never parsed. A body
// the worker streams is written to the socket piece by piece (pipeBody). A chat turn
// passes the rollout door first (rollout-door.ts). A records GET whose worker kept the
// response for a handoff ticket is not relayed: the client's socket goes to that worker
// (records-handoff.ts). A failure is thrown as the router's coded error, which fixes its
// status (docs/http.md): no live worker, or the worker died mid-request, is
// WorkerUnavailableError (503); held past --hold-timeout-ms, HoldTimeoutError (503 with
// Retry-After); the worker failed the request otherwise, WorkerFailedError (502). The
// app's error handler writes it (error-reply.ts).
import type { FastifyReply, FastifyRequest } from "fastify";
import { ChannelClosedError, RequestAbortedError, release } from "../../transport/index.ts";
import { requestShard, type ShardRequest } from "../protocol/shard-protocol.ts";
import { HoldTimeoutError, WorkerFailedError, WorkerUnavailableError } from "./errors.ts";
import type { RolloutDoor } from "./rollout-door.ts";
import type { ShardLinks } from "./shard-links.ts";
import type { RouterMetrics } from "./router-metrics.ts";
import type { SocketHandoff } from "./records-handoff.ts";
import { drained } from "../../buffers/drained.ts";
import { Cancel } from "../../buffers/cancel.ts";
import { cutShort } from "../../buffers/cut-short.ts";

/** What every relayed request shares: given once, when the routes are built (router-app.ts). */
export interface RelayDeps {
  links: ShardLinks;
  metrics?: RouterMetrics;
  /** The rollout door chat turns pass (rollout-door.ts); without one, nothing waits. */
  door?: RolloutDoor;
  /** Hands a records GET's socket to its worker (records-handoff.ts); without it GETs are relayed. */
  handoff?: SocketHandoff;
}

/** What differs between one relayed request and the next. */
export interface RelayRequest {
  /** The shard that owns the session. */
  shard: number;
  op: ShardRequest;
  /** The request's body as the chunks it came in (request-chunks.ts), sent on as they are. */
  body?: Buffer | Buffer[];
  /** A reply the router writes itself instead of a whole (not streamed) one, or undefined to relay it (session creation). */
  rewrite?: (status: number, headers: Record<string, string>) => { status: number; body: Buffer } | undefined;
  /** A chat turn: it passes the rollout door first, and the op carries the weight version it is sent under. */
  turn?: boolean;
  /** A records GET whose op carries this ticket: if the worker kept the response, hand it the socket. */
  ticket?: string;
}

export class Relay {
  readonly links: ShardLinks;
  readonly handoff: SocketHandoff | undefined;
  readonly #metrics: RouterMetrics | undefined;
  readonly #door: RolloutDoor | undefined;

  constructor({ links, metrics, door, handoff }: RelayDeps) {
    this.links = links;
    this.#metrics = metrics;
    this.#door = door;
    this.handoff = handoff;
  }

  async relay(
    request: FastifyRequest,
    reply: FastifyReply,
    { shard, op, body, rewrite, turn: isTurn, ticket }: RelayRequest,
  ): Promise<FastifyReply> {
    const links = this.links;
    const metrics = this.#metrics;
    const door = isTurn ? this.#door : undefined;
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
      if (err instanceof HoldTimeoutError) throw err;
      const detail = (err as WorkerUnavailableError).detail ?? String(err);
      request.log.warn({ shard, err: detail }, "shard unavailable");
      throw new WorkerUnavailableError(shard, "unavailable", { cause: err });
    }
    const sent = turn ? { ...op, weightVersion: door!.send(turn, channel) } : op;
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
        throw new WorkerUnavailableError(shard, "worker exited", { cause: err });
      }
      throw new WorkerFailedError((err as Error).message, { cause: err });
    }
    if (res.handoff) {
      // The worker kept the response (only ever for a ticket this router sent).
      if (this.handoff === undefined || ticket === undefined) throw new WorkerFailedError("unasked records handoff");
      return this.handoff.handOff(reply, { shard, epoch: links.epochOf(channel), ticket }, metrics);
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
      const own = rewrite?.(status, headers);
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
