// A Channel multiplexes requests and replies over one connected Unix socket: ids
// match replies to requests in any order, bodies stream as chunks under per-stream
// window credit (outbound-scheduler.ts), errors cross by code (error-codec.ts), and
// cancellation and close fail exactly the requests they concern. Either side may
// serve. It knows nothing of sessions or HTTP and never parses a body.

import type { Socket } from "node:net";
import { errorFromWire, errorToWire, type WireError } from "./error-codec.ts";
import { ChannelClosedError, NoHandlerError, ProtocolError, RequestAbortedError, transportErrorCodes, type ErrorClass } from "./errors.ts";
import { FrameDecoder, Flag, Kind, MAX_ID, type FrameSink } from "./frame-codec.ts";
import { BodyQueue, type IncomingBody } from "./incoming-body.ts";
import { OutboundScheduler } from "./outbound-scheduler.ts";
import { planBody, type OutBody } from "./body-plan.ts";

export type Meta = Record<string, unknown>;
export interface IncomingRequest {
  id: number;
  meta: Meta;
  body: IncomingBody;
  /** Aborted when the caller cancels or the channel closes. */
  signal: AbortSignal;
}
export interface Reply {
  meta: Meta;
  body?: OutBody;
}
export type Handler = (req: IncomingRequest) => Promise<Reply>;
export interface IncomingReply {
  meta: Meta;
  body: IncomingBody;
}
export interface ChannelOptions {
  /** Corruption guard: a received length above it tears the channel down. Default 16 MiB. */
  maxFrameBytes?: number;
  /** Streaming bodies are cut into chunks of at most this size. Default 1 MiB. */
  chunkBytes?: number;
  /** Per-stream receive window: unconsumed bytes a sender may have in flight. Default 4 MiB. */
  windowBytes?: number;
  /** Extra coded error classes to rebuild when a peer's handler throws them. */
  errorCodes?: Record<string, ErrorClass>;
}
export interface ChannelStats {
  pending: number; // my requests awaiting their reply or its body
  serving: number; // peer requests whose handler or reply stream is still running
  outStreams: number;
  creditBlocked: number; // outgoing streams waiting for window credit
  socketBlocked: boolean; // waiting for the socket's 'drain' before writing more chunks
  bufferedBytes: number; // written but not yet taken by the kernel, plus prefetched stream bytes
  inboundBufferedBytes: number; // received body bytes nobody has consumed yet
}

interface Call {
  resolve(r: IncomingReply): void;
  reject(e: Error): void;
  replied: boolean;
  body: BodyQueue | undefined;
  cleanup(): void;
}
interface Served {
  controller: AbortController | undefined; // made on first use of req.signal (it is not free)
  abortReason: Error | undefined;
  body: BodyQueue;
  cancelled: boolean;
}

function abortServed(s: Served, reason: Error): void {
  s.abortReason ??= reason;
  s.controller?.abort(reason);
}

const noop = () => {};

export class Channel {
  readonly #socket: Socket;
  readonly #initiator: boolean;
  readonly #chunkBytes: number;
  readonly #windowBytes: number;
  readonly #errorTable: Record<string, ErrorClass>;
  readonly #sched: OutboundScheduler;
  readonly #decoder: FrameDecoder;
  readonly #calls = new Map<number, Call>();
  readonly #served = new Map<number, Served>();
  readonly #inbound = new Map<number, BodyQueue>(); // open streaming bodies by id
  #nextId: number;
  #target: BodyQueue | undefined; // where the body bytes of the frame being decoded go
  #targetIsSingle = false;
  // A request or reply with a one-frame body is handed over once that body is complete,
  // so collect() returns at once (no per-piece async iteration on the hot path).
  #afterFrame: (() => void) | undefined;
  #handler: Handler | undefined;
  #closed = false;
  #closeError: Error | undefined;
  #closeCallbacks: Array<(err?: Error) => void> = [];

  /** `initiator`: the connecting side uses odd request ids, the accepting side even. */
  constructor(socket: Socket, options: ChannelOptions & { initiator?: boolean } = {}) {
    const maxFrameBytes = options.maxFrameBytes ?? 16 * 2 ** 20;
    this.#chunkBytes = options.chunkBytes ?? 2 ** 20;
    this.#windowBytes = options.windowBytes ?? 4 * this.#chunkBytes;
    if (!(this.#chunkBytes > 0 && this.#chunkBytes + 64 <= maxFrameBytes)) throw new RangeError("chunkBytes must be positive and leave room for a frame head below maxFrameBytes");
    if (!(this.#windowBytes >= 2)) throw new RangeError("windowBytes must be at least 2");
    this.#errorTable = { ...transportErrorCodes, ...options.errorCodes };
    this.#socket = socket;
    this.#initiator = options.initiator ?? true;
    this.#nextId = this.#initiator ? 1 : 2;
    this.#sched = new OutboundScheduler(socket, this.#chunkBytes, maxFrameBytes);
    this.#decoder = new FrameDecoder(this.#sink(), maxFrameBytes);
    socket.on("data", (chunk: Buffer) => {
      try {
        this.#decoder.push(chunk);
      } catch (err) {
        this.close(err as Error);
      }
    });
    socket.on("error", (err) => this.close(err));
    socket.on("end", () => this.close());
    socket.on("close", () => this.close());
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Resolves when the reply's header frame arrives; its body then streams. */
  request(meta: Meta, body?: OutBody, options: { signal?: AbortSignal } = {}): Promise<IncomingReply> {
    if (this.#closed) return Promise.reject(this.#closedError());
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(new RequestAbortedError());
    const id = this.#nextId;
    this.#nextId += 2; // never reused on this channel
    if (id > MAX_ID) return Promise.reject(new ProtocolError("request ids exhausted on this channel"));
    let plan;
    try {
      plan = planBody(body, this.#chunkBytes);
      this.#sched.send(Kind.REQUEST, plan.flags, id, meta, plan.flags === Flag.BODY_SINGLE ? plan.parts : undefined, plan.flags === Flag.BODY_SINGLE ? plan.bytes : 0);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<IncomingReply>((resolve, reject) => {
      const call: Call = { resolve, reject, replied: false, body: undefined, cleanup: noop };
      this.#calls.set(id, call);
      if (signal !== undefined) {
        const onAbort = () => this.#abortCall(id);
        signal.addEventListener("abort", onAbort, { once: true });
        call.cleanup = () => signal.removeEventListener("abort", onAbort);
      }
      if (plan.flags === Flag.BODY_STREAM) {
        this.#sched.addStream(id, plan.source, (failure) => {
          if (failure !== undefined) this.#sendControl(Kind.BODY_ERROR, id, errorToWire(failure));
        });
      }
    });
  }

  serve(handler: Handler): void {
    if (this.#handler !== undefined) throw new TypeError("this channel already has a handler");
    this.#handler = handler;
  }

  /** Runs once, with the error that closed the channel (undefined for a clean close/EOF). */
  onClose(callback: (err?: Error) => void): void {
    if (this.#closed) queueMicrotask(() => callback(this.#closeError));
    else this.#closeCallbacks.push(callback);
  }

  close(err?: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#closeError = err;
    this.#decoder.stop();
    this.#sched.close();
    this.#socket.destroy();
    const closedErr = this.#closedError();
    for (const call of this.#calls.values()) {
      call.cleanup();
      if (!call.replied) call.reject(closedErr);
      else call.body?.fail(closedErr);
    }
    this.#calls.clear();
    for (const s of this.#served.values()) {
      abortServed(s, closedErr);
      s.body.fail(closedErr);
    }
    this.#served.clear();
    for (const b of this.#inbound.values()) b.fail(closedErr);
    this.#inbound.clear();
    this.#target = undefined;
    this.#afterFrame = undefined;
    const callbacks = this.#closeCallbacks;
    this.#closeCallbacks = [];
    for (const cb of callbacks) {
      try {
        cb(err);
      } catch (cbErr) {
        process.nextTick(() => {
          throw cbErr; // a throwing close callback is a bug in its owner; do not hide it
        });
      }
    }
  }

  stats(): ChannelStats {
    let inboundBufferedBytes = 0;
    for (const c of this.#calls.values()) inboundBufferedBytes += c.body?.bufferedBytes ?? 0;
    for (const s of this.#served.values()) inboundBufferedBytes += s.body.bufferedBytes;
    return {
      pending: this.#calls.size,
      serving: this.#served.size,
      outStreams: this.#sched.streamCount,
      creditBlocked: this.#sched.creditBlocked,
      socketBlocked: this.#sched.socketBlocked,
      bufferedBytes: this.#sched.bufferedBytes,
      inboundBufferedBytes,
    };
  }

  #closedError(): ChannelClosedError {
    const err = this.#closeError;
    return new ChannelClosedError(err === undefined ? "transport channel closed" : `transport channel closed: ${err.message}`, undefined, { cause: err });
  }

  #isMine(id: number): boolean {
    return id % 2 === (this.#initiator ? 1 : 0);
  }

  #abortCall(id: number): void {
    const call = this.#calls.get(id);
    if (call === undefined) return;
    this.#calls.delete(id);
    call.cleanup();
    const err = new RequestAbortedError();
    if (!call.replied) call.reject(err);
    else call.body?.fail(err);
    this.#inbound.delete(id); // late frames for this id are dropped from here on
    this.#sched.stop(id);
    this.#sendControl(Kind.CANCEL, id);
  }

  /** A frame that must not fail a request; an unencodable error is cut down to its message. */
  #sendControl(kind: number, id: number, meta?: unknown): void {
    if (this.#closed) return;
    try {
      this.#sched.send(kind, Flag.BODY_NONE, id, meta);
    } catch (err) {
      if (kind !== Kind.ERROR && kind !== Kind.BODY_ERROR) return this.close(err as Error);
      const w = meta as WireError;
      try {
        this.#sched.send(kind, Flag.BODY_NONE, id, { code: w.code, status: w.status, message: String(w.message).slice(0, 4096) });
      } catch (err2) {
        this.close(err2 as Error);
      }
    }
  }

  #openBody(id: number, flags: number, settled: () => void): BodyQueue {
    if (flags === Flag.BODY_STREAM) {
      let unacked = 0;
      const body = new BodyQueue(true, {
        consumed: (n) => {
          unacked += n;
          // Refill in batches of half a window so credit frames stay rare.
          if (unacked * 2 >= this.#windowBytes && this.#inbound.get(id) === body) {
            this.#sendControl(Kind.CREDIT, id, unacked);
            unacked = 0;
          }
        },
        abandoned: () => {
          if (this.#inbound.get(id) !== body) return;
          this.#inbound.delete(id);
          this.#sendControl(Kind.STOP, id);
        },
        settled,
      });
      this.#inbound.set(id, body);
      this.#sendControl(Kind.CREDIT, id, this.#windowBytes);
      return body;
    }
    const body = new BodyQueue(false, { settled });
    if (flags === Flag.BODY_SINGLE) {
      this.#target = body;
      this.#targetIsSingle = true;
    } else {
      body.end();
    }
    return body;
  }

  #sink(): FrameSink {
    return {
      frame: (kind, flags, id, meta) => this.#onFrame(kind, flags, id, meta),
      body: (piece) => this.#target?.push(piece),
      frameEnd: () => {
        if (this.#targetIsSingle) this.#target?.end();
        this.#target = undefined;
        this.#targetIsSingle = false;
        const dispatch = this.#afterFrame;
        this.#afterFrame = undefined;
        dispatch?.();
      },
    };
  }

  #onFrame(kind: number, flags: number, id: number, meta: unknown): void {
    switch (kind) {
      case Kind.REQUEST:
        return this.#onRequest(flags, id, meta);
      case Kind.REPLY: {
        const call = this.#calls.get(id);
        if (call === undefined || call.replied) return; // late reply of a cancelled request
        call.replied = true;
        const body = this.#openBody(id, flags, () => this.#finishCall(id, call));
        call.body = body;
        const deliver = () => call.resolve({ meta: (meta ?? {}) as Meta, body });
        if (flags === Flag.BODY_SINGLE) this.#afterFrame = deliver;
        else deliver();
        return;
      }
      case Kind.ERROR: {
        const call = this.#calls.get(id);
        if (call === undefined || call.replied) return;
        this.#calls.delete(id);
        call.cleanup();
        call.reject(errorFromWire(meta, this.#errorTable));
        return;
      }
      case Kind.CHUNK:
        this.#target = this.#inbound.get(id);
        return;
      case Kind.END:
      case Kind.BODY_ERROR: {
        const body = this.#inbound.get(id);
        if (body === undefined) return;
        this.#inbound.delete(id);
        if (kind === Kind.END) body.end();
        else body.fail(errorFromWire(meta, this.#errorTable));
        return;
      }
      case Kind.CANCEL:
        return this.#onCancel(id);
      case Kind.CREDIT:
        if (typeof meta !== "number" || !(meta > 0)) throw new ProtocolError(`bad credit ${String(meta)} for request ${id}`);
        return this.#sched.grant(id, meta);
      case Kind.STOP:
        return this.#sched.stop(id);
      default:
        throw new ProtocolError(`unknown frame kind ${kind}`);
    }
  }

  #onRequest(flags: number, id: number, meta: unknown): void {
    if (this.#isMine(id) || this.#served.has(id)) throw new ProtocolError(`peer sent a request with invalid id ${id}`);
    if (meta === null || typeof meta !== "object") throw new ProtocolError(`request ${id} has no metadata object`);
    const served: Served = { controller: undefined, abortReason: undefined, body: undefined as unknown as BodyQueue, cancelled: false };
    served.body = this.#openBody(id, flags, () => {});
    this.#served.set(id, served);
    const handler = this.#handler;
    if (handler === undefined) return this.#replyError(id, served, new NoHandlerError());
    const req: IncomingRequest = {
      id,
      meta: meta as Meta,
      body: served.body,
      get signal() {
        if (served.controller === undefined) {
          served.controller = new AbortController();
          if (served.abortReason !== undefined) served.controller.abort(served.abortReason);
        }
        return served.controller.signal;
      },
    };
    const run = () => {
      if (served.cancelled || this.#closed) return;
      let result: Promise<Reply>;
      try {
        result = handler(req);
      } catch (err) {
        return this.#replyError(id, served, err);
      }
      Promise.resolve(result).then(
        (reply) => this.#reply(id, served, reply),
        (err) => this.#replyError(id, served, err),
      );
    };
    if (flags === Flag.BODY_SINGLE) this.#afterFrame = run;
    else run();
  }

  #reply(id: number, served: Served, reply: Reply): void {
    if (served.cancelled || this.#closed) return;
    let plan;
    try {
      plan = planBody(reply?.body, this.#chunkBytes);
      this.#sched.send(Kind.REPLY, plan.flags, id, reply?.meta ?? {}, plan.flags === Flag.BODY_SINGLE ? plan.parts : undefined, plan.flags === Flag.BODY_SINGLE ? plan.bytes : 0);
    } catch (err) {
      return this.#replyError(id, served, err); // e.g. header over maxFrameBytes: fails this request only
    }
    if (plan.flags !== Flag.BODY_STREAM) return this.#finishServed(id, served);
    this.#sched.addStream(id, plan.source, (failure) => {
      if (failure !== undefined) this.#sendControl(Kind.BODY_ERROR, id, errorToWire(failure));
      this.#finishServed(id, served);
    });
  }

  #replyError(id: number, served: Served, err: unknown): void {
    if (served.cancelled || this.#closed) return;
    this.#sendControl(Kind.ERROR, id, errorToWire(err));
    this.#finishServed(id, served);
  }

  #onCancel(id: number): void {
    const served = this.#served.get(id);
    if (served === undefined) return;
    served.cancelled = true;
    this.#served.delete(id);
    const err = new RequestAbortedError("request cancelled by the caller");
    abortServed(served, err);
    this.#sched.stop(id);
    if (this.#inbound.get(id) === served.body) this.#inbound.delete(id);
    served.body.fail(err);
  }

  #finishServed(id: number, served: Served): void {
    if (this.#served.get(id) !== served) return;
    this.#served.delete(id);
    served.body.discard(); // an unread request body: tell the caller to stop sending it
  }

  #finishCall(id: number, call: Call): void {
    if (this.#calls.get(id) !== call) return;
    this.#calls.delete(id);
    call.cleanup();
  }
}
