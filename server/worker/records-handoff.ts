// The worker's side of the records handoff (docs/architecture.md, "The records handoff"):
// a get op with a ticket keeps its 200 response here (the snapshot the core took under the
// session lock), and the router is told so instead of being sent the body. When the host
// passes on the client's socket for that ticket, the response is written to it directly
// (server/raw-http-response.ts). A response nobody claims in time is dropped and its
// buffers released; a socket whose ticket is unknown is closed.
import type { Socket } from "node:net";
import type { RecordsHandoff } from "../../actors/index.ts";
import { release } from "../../buffers/release.ts";
import type { CoreResponse } from "../../sessions/index.ts";
import { adoptSocket, writeRawResponse } from "../raw-http-response.ts";
import type { WorkerMetrics } from "./worker-metrics.ts";

/** How long a kept response waits for its socket (the router sends it right after the reply). */
export const PARK_MS = 10_000;

interface Parked {
  res: CoreResponse;
  timer: NodeJS.Timeout;
}

export class ParkedResponses {
  readonly #parked = new Map<string, Parked>();
  readonly #metrics: WorkerMetrics;
  readonly #parkMs: number;

  constructor(metrics: WorkerMetrics, parkMs = PARK_MS) {
    this.#metrics = metrics;
    this.#parkMs = parkMs;
  }

  get size(): number {
    return this.#parked.size;
  }

  /** Keeps `res` for the socket of `ticket`, at most the park time. */
  park(ticket: string, res: CoreResponse): void {
    this.#drop(ticket); // a router never reuses a ticket; were one kept, it goes
    const timer = setTimeout(() => this.#drop(ticket), this.#parkMs);
    timer.unref();
    this.#parked.set(ticket, { res, timer });
  }

  /** Writes the kept response of the handoff's ticket to `socket`; resolves when it is over. */
  async deliver(handoff: RecordsHandoff, socket: Socket): Promise<void> {
    adoptSocket(socket);
    const parked = this.#parked.get(handoff.ticket);
    if (parked === undefined) {
      this.#metrics.handoff("unclaimed");
      socket.destroy();
      return;
    }
    this.#parked.delete(handoff.ticket);
    clearTimeout(parked.timer);
    const { status, headers, body } = parked.res;
    const complete = await writeRawResponse(socket, status, [handoff.headers, headers], body, (bytes) =>
      this.#metrics.handoffBytes(bytes),
    );
    this.#metrics.handoff(complete ? "written" : "cut");
  }

  /** Drops every kept response (the worker is closing). */
  close(): void {
    for (const ticket of [...this.#parked.keys()]) this.#drop(ticket);
  }

  #drop(ticket: string): void {
    const parked = this.#parked.get(ticket);
    if (parked === undefined) return;
    this.#parked.delete(ticket);
    clearTimeout(parked.timer);
    this.#metrics.handoff("expired");
    discard(parked.res.body);
  }
}

/** Gives back what a body holds: pooled buffers, or a stream's pinned journal segments. */
function discard(body: CoreResponse["body"]): void {
  if (Buffer.isBuffer(body)) return release(body);
  if (Array.isArray(body)) return body.forEach(release);
  const stop = body[Symbol.asyncIterator]().return?.();
  if (stop instanceof Promise) stop.catch(() => {});
}
