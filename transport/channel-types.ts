// The types of the channel API (re-exported by index.ts) and the two per-request
// records a channel keeps: a call it made and a request it serves. Plain data; the
// protocol logic lives in channel.ts and inbound-bodies.ts.

import type { ErrorClass } from "./errors.ts";
import type { BodyQueue, IncomingBody } from "./incoming-body.ts";
import type { OutBody } from "./body-plan.ts";
import { Cancel, type CancelSignal } from "../buffers/cancel.ts";

export type Meta = Record<string, unknown>;
export interface IncomingRequest {
  id: number;
  meta: Meta;
  body: IncomingBody;
  /** Aborted when the caller cancels or the channel closes. */
  readonly signal: CancelSignal;
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
  /** Per-stream receive window: unconsumed bytes a sender may have in flight. Default 8 chunks. */
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

/** A request this side sent. */
export class PendingCall {
  replied = false; // the promise resolved; from here on failures go to the body
  body: BodyQueue | undefined; // set when the reply header arrives
  meta: Meta | undefined;
  cleanup: (() => void) | undefined; // removes the abort listener
  constructor(
    readonly resolve: (r: IncomingReply) => void,
    readonly reject: (e: Error) => void,
  ) {}
}

/** A request this side serves; it is also the handler's IncomingRequest. */
export class ServedRequest implements IncomingRequest {
  cancelled = false;
  // A plain object (buffers/cancel.ts), cheap enough to make for every request.
  readonly #cancel = new Cancel();
  constructor(
    readonly id: number,
    readonly meta: Meta,
    readonly body: BodyQueue,
  ) {}

  get signal(): CancelSignal {
    return this.#cancel;
  }

  /** The first abort's reason stays. */
  abort(reason: Error): void {
    this.#cancel.abort(reason);
  }
}
