// The receiving half of body flow control on one channel: which streamed bodies are open,
// where the body bytes of the frame being decoded go, and how a consumer's reading turns
// into window credit for the sender. A streamed body gets a full window when it opens and
// is refilled in quarter-window batches as it is read; a consumer that stops early sends
// STOP. A one-frame body fills from its own header frame and ends with it. Control frames
// go out through the channel, which also decides what a settled body finishes.

import { Flag, Kind } from "./frame-codec.ts";
import { BodyQueue, type BodyHooks } from "./incoming-body.ts";
import type { ReadSlabs } from "./read-slabs.ts";

/** Sends a frame that must not fail a request (the channel's own control sender). */
export type SendControl = (kind: number, id: number, meta?: unknown) => void;

export class InboundBodies {
  readonly #windowBytes: number;
  readonly #reads: ReadSlabs | undefined;
  readonly #sendControl: SendControl;
  readonly #open = new Map<number, BodyQueue>(); // open streaming bodies by id
  #target: BodyQueue | undefined; // where the body bytes of the frame being decoded go
  #targetIsSingle = false;
  readonly #hooks: BodyHooks;

  /**
   * `reads`: the socket's pooled read slabs, if any; pieces handed on are held views.
   * `settled`: runs once per body when it is ended, failed or abandoned.
   */
  constructor(
    windowBytes: number,
    reads: ReadSlabs | undefined,
    sendControl: SendControl,
    settled: (body: BodyQueue) => void,
  ) {
    this.#windowBytes = windowBytes;
    this.#reads = reads;
    this.#sendControl = sendControl;
    this.#hooks = this.#makeHooks(settled);
  }

  /** The body of a request or reply whose header frame is being decoded. */
  open(id: number, flags: number): BodyQueue {
    const body = new BodyQueue(id, flags === Flag.BODY_STREAM, this.#hooks);
    if (flags === Flag.BODY_STREAM) {
      this.#open.set(id, body);
      this.#sendControl(Kind.CREDIT, id, this.#windowBytes);
    } else if (flags === Flag.BODY_SINGLE) {
      this.#target = body;
      this.#targetIsSingle = true;
    } else {
      body.end();
    }
    return body;
  }

  /** A CHUNK frame for `id`: its bytes go to that body, or nowhere if none is open. */
  chunk(id: number): void {
    this.#target = this.#open.get(id);
  }

  /** Body bytes of the frame being decoded. */
  push(piece: Buffer): void {
    const target = this.#target;
    if (target !== undefined) target.push(this.#reads === undefined ? piece : this.#reads.hold(piece));
  }

  /** The frame is complete: a one-frame body ends with it. */
  frameEnd(): void {
    if (this.#targetIsSingle) this.#target?.end();
    this.#target = undefined;
    this.#targetIsSingle = false;
  }

  /** The stream open under `id` ends here (END or BODY_ERROR); undefined if none is. */
  take(id: number): BodyQueue | undefined {
    const body = this.#open.get(id);
    if (body !== undefined) this.#open.delete(id);
    return body;
  }

  /** Late frames for `id` are dropped from here on (only if `body` is the one open, when given). */
  forget(id: number, body?: BodyQueue): void {
    if (body === undefined || this.#open.get(id) === body) this.#open.delete(id);
  }

  /** The channel closed: every open stream fails with `err`. */
  failAll(err: Error): void {
    for (const b of this.#open.values()) b.fail(err);
    this.#open.clear();
    this.#target = undefined;
  }

  // One hooks object per channel: bodies report by reference, no closures per body.
  #makeHooks(settled: (body: BodyQueue) => void): BodyHooks {
    return {
      consumed: (body, n) => {
        if (!body.streaming) return;
        body.unacked += n;
        // Refill in quarter-window batches: credit frames stay rare, yet the sender
        // gets more window well before it runs dry.
        if (body.unacked * 4 >= this.#windowBytes && this.#open.get(body.id) === body) {
          this.#sendControl(Kind.CREDIT, body.id, body.unacked);
          body.unacked = 0;
        }
      },
      abandoned: (body) => {
        if (this.#open.get(body.id) !== body) return;
        this.#open.delete(body.id);
        this.#sendControl(Kind.STOP, body.id);
      },
      settled,
    };
  }
}
