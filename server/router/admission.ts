// Bounded admission of chat turns (docs/operations.md, "Overload"): at most
// --max-inflight-turns turns of this instance are past the door at once; more wait here
// in arrival order (one queue for every session, so none is starved), and beyond
// --max-queued-turns waiting (turns held by a paused rollout door count too) a turn is
// refused at once with a 429 and Retry-After, the back-pressure signal SDKs retry on. A
// client that goes away leaves the queue. 0 means unlimited for either bound.
import { RequestAbortedError } from "../../transport/index.ts";
import type { CancelSignal } from "../../buffers/cancel.ts";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Gauge, type MetricSet } from "../protocol/metric-series.ts";
import { Cancel } from "../../buffers/cancel.ts";
import { OverloadedError } from "./errors.ts";

/** The Retry-After of a 429: long enough for a turn of the queue to move. */
export const OVERLOADED_RETRY_AFTER_S = 1;
const JSON_TYPE = "application/json; charset=utf-8";

interface Waiter {
  admit(): void;
  refuse(err: Error): void;
}

export interface AdmissionOptions {
  maxInflight: number;
  maxQueued: number;
  /** Turns held elsewhere that count as queued (the rollout door's, while paused). */
  held?: () => number;
}

export class Admission {
  readonly #maxInflight: number;
  readonly #maxQueued: number;
  readonly #held: () => number;
  readonly #queue: Waiter[] = [];
  #inflight = 0;

  constructor({ maxInflight, maxQueued, held }: AdmissionOptions) {
    this.#maxInflight = maxInflight;
    this.#maxQueued = maxQueued;
    this.#held = held ?? (() => 0);
  }

  get inflight(): number {
    return this.#inflight;
  }
  get queued(): number {
    return this.#queue.length + this.#held();
  }

  /** Resolves with the turn's release (call it once, when the turn is over) when it may go on; rejects with OverloadedError or RequestAbortedError. */
  enter(signal: CancelSignal): Promise<() => void> {
    if (this.#maxInflight === 0 || (this.#inflight < this.#maxInflight && this.#queue.length === 0)) {
      this.#inflight++;
      return Promise.resolve(this.#release());
    }
    if (this.#maxQueued > 0 && this.queued >= this.#maxQueued)
      return Promise.reject(new OverloadedError(this.#inflight, this.queued, OVERLOADED_RETRY_AFTER_S));
    return new Promise((resolve, reject) => {
      const gone = () => {
        const at = this.#queue.indexOf(waiter);
        if (at >= 0) this.#queue.splice(at, 1);
        reject(new RequestAbortedError());
      };
      const waiter: Waiter = {
        admit: () => {
          signal.removeEventListener("abort", gone);
          this.#inflight++;
          resolve(this.#release());
        },
        refuse: reject,
      };
      if (signal.aborted) return gone();
      signal.addEventListener("abort", gone, { once: true });
      this.#queue.push(waiter);
    });
  }

  #release(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#inflight--;
      this.#queue.shift()?.admit();
    };
  }
}

/** tito_admission_inflight_turns and tito_admission_queued_turns, read at scrape time. */
export function admissionGauges(set: MetricSet, admission: Admission): void {
  new Gauge(set, {
    name: "tito_admission_inflight_turns",
    help: "Chat turns past the admission bound (--max-inflight-turns) now.",
    collect: (g) => g.set(admission.inflight),
  });
  new Gauge(set, {
    name: "tito_admission_queued_turns",
    help: "Chat turns waiting for --max-inflight-turns, with those a paused rollout door holds (--max-queued-turns bounds them).",
    collect: (g) => g.set(admission.queued),
  });
}

/**
 * Admits one chat turn of `reply`'s request: true once it may go on (its slot is freed when
 * the response is over, however it ends), false when the reply was written (a 429, in the
 * Anthropic shape on /v1/messages) or the client left while it waited.
 */
export async function admitTurn(admission: Admission, request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  const gone = new Cancel();
  const onClose = () => gone.abort();
  reply.raw.once("close", onClose);
  let release: () => void;
  try {
    release = await admission.enter(gone.signal);
  } catch (err) {
    reply.raw.off("close", onClose);
    if (!(err instanceof OverloadedError)) return false; // the client left the queue
    reply.code(429).header("retry-after", String(err.retryAfterS)).header("content-type", JSON_TYPE);
    const anthropic = (request.raw.url ?? "").split("?")[0]!.endsWith("/v1/messages");
    const body = anthropic
      ? { type: "error", error: { type: "rate_limit_error", message: err.message } }
      : { error: err.message, code: err.code };
    void reply.send(JSON.stringify(body));
    return false;
  }
  reply.raw.off("close", onClose);
  if (reply.raw.destroyed) {
    release();
    return false;
  }
  reply.raw.once("close", release);
  return true;
}
