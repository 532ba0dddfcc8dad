// A Channel multiplexes requests and replies over one connected Unix socket: ids
// match replies to requests in any order, bodies stream as chunks under per-stream
// window credit (sending: outbound-scheduler.ts, receiving: inbound-bodies.ts), errors
// cross by code (error-codec.ts), and cancellation and close fail exactly the requests
// they concern. Either side may serve. It knows nothing of sessions or HTTP and never
// parses a body.

import type { Socket } from "node:net";
import { errorFromWire, errorToWire, type WireError } from "./error-codec.ts";
import {
  ChannelClosedError,
  NoHandlerError,
  ProtocolError,
  RequestAbortedError,
  transportErrorCodes,
  type ErrorClass,
} from "./errors.ts";
import { FrameDecoder, Flag, Kind, MAX_ID, type FrameSink } from "./frame-codec.ts";
import { InboundBodies } from "./inbound-bodies.ts";
import {
  PendingCall,
  ServedRequest,
  type ChannelOptions,
  type ChannelStats,
  type Handler,
  type IncomingReply,
  type Meta,
  type Reply,
} from "./channel-types.ts";
import { OutboundScheduler } from "./outbound-scheduler.ts";
import { planBody, type OutBody } from "./body-plan.ts";
import type { ReadSlabs } from "./read-slabs.ts";
import type { CancelSignal } from "../buffers/cancel.ts";

export type {
  ChannelOptions,
  ChannelStats,
  Handler,
  IncomingReply,
  IncomingRequest,
  Meta,
  Reply,
} from "./channel-types.ts";

export class Channel {
  readonly #socket: Socket;
  readonly #initiator: boolean;
  readonly #chunkBytes: number;
  readonly #errorTable: Record<string, ErrorClass>;
  readonly #sched: OutboundScheduler;
  readonly #decoder: FrameDecoder;
  readonly #calls = new Map<number, PendingCall>();
  readonly #served = new Map<number, ServedRequest>();
  readonly #bodies: InboundBodies; // received bodies: where body bytes go, window credit
  #nextId: number;
  // A request or reply with a one-frame body is handed over once that body is complete,
  // so collect() returns at once (no per-piece async iteration on the hot path).
  #afterFrame: PendingCall | ServedRequest | undefined;
  #handler: Handler | undefined;
  #closed = false;
  #closeError: Error | undefined;
  #closeCallbacks: Array<(err?: Error) => void> = [];

  /**
   * `initiator`: the connecting side uses odd request ids, the accepting side even.
   * `reads`: the socket was created with `reads.onread()`; body pieces handed on are views
   * of its slabs, each with a release under WRITTEN (see read-slabs.ts).
   */
  constructor(socket: Socket, options: ChannelOptions & { initiator?: boolean; reads?: ReadSlabs } = {}) {
    const maxFrameBytes = options.maxFrameBytes ?? 16 * 2 ** 20;
    this.#chunkBytes = options.chunkBytes ?? 2 ** 20;
    const windowBytes = options.windowBytes ?? 8 * this.#chunkBytes;
    if (!(this.#chunkBytes > 0 && this.#chunkBytes + 64 <= maxFrameBytes))
      throw new RangeError("chunkBytes must be positive and leave room for a frame head below maxFrameBytes");
    if (!(windowBytes >= 2)) throw new RangeError("windowBytes must be at least 2");
    this.#errorTable = { ...transportErrorCodes, ...options.errorCodes };
    this.#socket = socket;
    this.#initiator = options.initiator ?? true;
    this.#nextId = this.#initiator ? 1 : 2;
    this.#sched = new OutboundScheduler(socket, this.#chunkBytes, maxFrameBytes);
    this.#decoder = new FrameDecoder(this.#sink(), maxFrameBytes);
    this.#bodies = new InboundBodies(
      windowBytes,
      options.reads,
      (kind, id, meta) => this.#sendControl(kind, id, meta),
      (body) => {
        const call = this.#calls.get(body.id); // only my ids have calls; served ids never match
        if (call !== undefined && call.body === body) this.#finishCall(body.id, call);
      },
    );
    const feed = (chunk: Buffer) => {
      try {
        this.#decoder.push(chunk);
      } catch (err) {
        this.close(err as Error);
      }
    };
    if (options.reads !== undefined) options.reads.attach(feed);
    else socket.on("data", feed);
    socket.on("error", (err) => this.close(err));
    socket.on("end", () => this.close());
    socket.on("close", () => this.close());
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Resolves when the reply's header frame arrives; its body then streams. */
  request(meta: Meta, body?: OutBody, options: { signal?: CancelSignal } = {}): Promise<IncomingReply> {
    if (this.#closed) return Promise.reject(this.#closedError());
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(new RequestAbortedError());
    const id = this.#nextId;
    this.#nextId += 2; // never reused on this channel
    if (id > MAX_ID) return Promise.reject(new ProtocolError("request ids exhausted on this channel"));
    let plan;
    try {
      plan = planBody(body, this.#chunkBytes);
      this.#sched.send(
        Kind.REQUEST,
        plan.flags,
        id,
        meta,
        plan.flags === Flag.BODY_SINGLE ? plan.parts : undefined,
        plan.flags === Flag.BODY_SINGLE ? plan.bytes : 0,
      );
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<IncomingReply>((resolve, reject) => {
      const call = new PendingCall(resolve, reject);
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
      call.cleanup?.();
      if (!call.replied) call.reject(closedErr);
      else call.body?.fail(closedErr);
    }
    this.#calls.clear();
    for (const s of this.#served.values()) {
      s.abort(closedErr);
      s.body.fail(closedErr);
    }
    this.#served.clear();
    this.#bodies.failAll(closedErr);
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
    return new ChannelClosedError(
      err === undefined ? "transport channel closed" : `transport channel closed: ${err.message}`,
      undefined,
      { cause: err },
    );
  }

  #isMine(id: number): boolean {
    return id % 2 === (this.#initiator ? 1 : 0);
  }

  #abortCall(id: number): void {
    const call = this.#calls.get(id);
    if (call === undefined) return;
    this.#calls.delete(id);
    call.cleanup?.();
    const err = new RequestAbortedError();
    if (!call.replied) call.reject(err);
    else call.body?.fail(err);
    this.#bodies.forget(id); // late frames for this id are dropped from here on
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
        this.#sched.send(kind, Flag.BODY_NONE, id, {
          code: w.code,
          status: w.status,
          message: String(w.message).slice(0, 4096),
        });
      } catch (err2) {
        this.close(err2 as Error);
      }
    }
  }

  #sink(): FrameSink {
    return {
      frame: (kind, flags, id, meta) => this.#onFrame(kind, flags, id, meta),
      body: (piece) => this.#bodies.push(piece),
      frameEnd: () => {
        this.#bodies.frameEnd();
        const waiting = this.#afterFrame;
        this.#afterFrame = undefined;
        if (waiting instanceof PendingCall) this.#deliver(waiting);
        else if (waiting !== undefined) void this.#run(waiting);
      },
    };
  }

  #onFrame(kind: number, flags: number, id: number, meta: unknown): void {
    switch (kind) {
      case Kind.REQUEST:
        return this.#onRequest(flags, id, meta);
      case Kind.REPLY: {
        const call = this.#calls.get(id);
        if (call === undefined || call.body !== undefined) return; // late reply of a cancelled request
        call.meta = (meta ?? {}) as Meta;
        call.body = this.#bodies.open(id, flags);
        if (flags === Flag.BODY_NONE) this.#finishCall(id, call); // its body ended before call.body was set
        if (flags === Flag.BODY_SINGLE) this.#afterFrame = call;
        else this.#deliver(call);
        return;
      }
      case Kind.ERROR: {
        const call = this.#calls.get(id);
        if (call === undefined || call.body !== undefined) return;
        this.#calls.delete(id);
        call.cleanup?.();
        call.reject(errorFromWire(meta, this.#errorTable));
        return;
      }
      case Kind.CHUNK:
        return this.#bodies.chunk(id);
      case Kind.END:
      case Kind.BODY_ERROR: {
        const body = this.#bodies.take(id);
        if (body === undefined) return;
        if (kind === Kind.END) body.end();
        else body.fail(errorFromWire(meta, this.#errorTable));
        return;
      }
      case Kind.CANCEL:
        return this.#onCancel(id);
      case Kind.CREDIT:
        if (typeof meta !== "number" || !(meta > 0))
          throw new ProtocolError(`bad credit ${String(meta)} for request ${id}`);
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
    const served = new ServedRequest(id, meta as Meta, this.#bodies.open(id, flags));
    this.#served.set(id, served);
    if (flags === Flag.BODY_SINGLE) this.#afterFrame = served;
    else void this.#run(served);
  }

  // Until delivered, an abort or close rejects the caller's promise rather than the body
  // (resolving after that is a no-op). A one-frame body has already ended here.
  #deliver(call: PendingCall): void {
    call.replied = true;
    call.resolve({ meta: call.meta!, body: call.body! });
  }

  async #run(served: ServedRequest): Promise<void> {
    const handler = this.#handler;
    if (handler === undefined) return this.#replyError(served.id, served, new NoHandlerError());
    if (served.cancelled || this.#closed) return;
    let reply: Reply;
    try {
      reply = await handler(served);
    } catch (err) {
      return this.#replyError(served.id, served, err);
    }
    this.#reply(served.id, served, reply);
  }

  #reply(id: number, served: ServedRequest, reply: Reply): void {
    if (served.cancelled || this.#closed) return;
    let plan;
    try {
      plan = planBody(reply?.body, this.#chunkBytes);
      this.#sched.send(
        Kind.REPLY,
        plan.flags,
        id,
        reply?.meta ?? {},
        plan.flags === Flag.BODY_SINGLE ? plan.parts : undefined,
        plan.flags === Flag.BODY_SINGLE ? plan.bytes : 0,
      );
    } catch (err) {
      return this.#replyError(id, served, err); // e.g. header over maxFrameBytes: fails this request only
    }
    if (plan.flags !== Flag.BODY_STREAM) return this.#finishServed(id, served);
    this.#sched.addStream(id, plan.source, (failure) => {
      if (failure !== undefined) this.#sendControl(Kind.BODY_ERROR, id, errorToWire(failure));
      this.#finishServed(id, served);
    });
  }

  #replyError(id: number, served: ServedRequest, err: unknown): void {
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
    served.abort(err);
    this.#sched.stop(id);
    this.#bodies.forget(id, served.body);
    served.body.fail(err);
  }

  #finishServed(id: number, served: ServedRequest): void {
    if (this.#served.get(id) !== served) return;
    this.#served.delete(id);
    served.body.discard(); // an unread request body: tell the caller to stop sending it
  }

  #finishCall(id: number, call: PendingCall): void {
    if (this.#calls.get(id) !== call) return;
    this.#calls.delete(id);
    call.cleanup?.();
  }
}
