// The worker's side of the records handoff (docs/architecture.md, "The records handoff"):
// a get op with a ticket keeps its 200 response here (the snapshot the core took under the
// session lock), and the router is told so instead of being sent the body. When the host
// passes on the client's socket for that ticket, the response is written to it directly
// (server/handoff/raw-http-response.ts) — by the worker's records streamer when the body is read
// from the journal (records-streamer.ts), by the worker itself otherwise. A response nobody
// claims in time is dropped and its buffers released; a socket whose ticket is unknown is
// closed.
import type { Socket } from "node:net";
import type { RecordsHandoff } from "../handoff/records-handoff-message.ts";
import { release } from "../../buffers/release.ts";
import { RecordStream, type CoreResponse } from "../../sessions/index.ts";
import { adoptSocket, cutShort, writeRawResponse, type RawHeaders } from "../handoff/raw-http-response.ts";
import type { RecordsStreamer } from "./records-streamer.ts";
import type { WorkerMetrics } from "./worker-metrics.ts";

/** How long a kept response waits for its socket (the router sends it right after the reply). */
export const PARK_MS = 10_000;

interface Parked {
  res: CoreResponse;
  timer: NodeJS.Timeout;
}

export class ParkedResponses {
  readonly #parked = new Map<string, Parked>();
  /** The sockets of the responses this worker is writing itself. */
  readonly #writing = new Set<Socket>();
  readonly #metrics: WorkerMetrics;
  readonly #parkMs: number;
  readonly #minBytes: number;
  readonly #streamer: RecordsStreamer | undefined;

  /**
   * Without a `streamer`, the worker writes every body itself. `minBytes`: smaller bodies
   * are not kept (takes() says no) and go back to the router on the channel.
   */
  constructor(
    metrics: WorkerMetrics,
    streamer?: RecordsStreamer,
    { parkMs = PARK_MS, minBytes = 0 }: { parkMs?: number; minBytes?: number } = {},
  ) {
    this.#metrics = metrics;
    this.#streamer = streamer;
    this.#parkMs = parkMs;
    this.#minBytes = minBytes;
  }

  /**
   * Whether a 200 records response is worth a handoff: its body is at least `minBytes`
   * long. A handoff passes the client's socket twice (router -> host -> worker) and, for
   * a journal-backed body, once more to the streamer; for a small body that costs more
   * than the router relaying it (docs/benchmark.md, bench:hop's records route).
   */
  takes(res: CoreResponse): boolean {
    const length = Number(res.headers["content-length"]);
    return !(length < this.#minBytes); // no length known: keep it, as before
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
    const complete =
      (await this.#viaStreamer(socket, status, [handoff.headers, headers], body)) ??
      (await this.#write(socket, status, [handoff.headers, headers], body));
    this.#metrics.handoff(complete ? "written" : "cut");
  }

  async #write(socket: Socket, status: number, headers: RawHeaders[], body: CoreResponse["body"]) {
    this.#writing.add(socket);
    try {
      return await writeRawResponse(socket, status, headers, body, (bytes) => this.#metrics.handoffBytes(bytes));
    } finally {
      this.#writing.delete(socket);
    }
  }

  /**
   * A journal-backed body goes to the streamer, and its segments stay pinned until the
   * streamer is done with it. Undefined when the streamer did not take it (none, or it
   * could not): the socket and the untouched body are still ours.
   */
  async #viaStreamer(socket: Socket, status: number, headers: RawHeaders[], body: CoreResponse["body"]) {
    if (!this.#streamer?.usable || !(body instanceof RecordStream)) return undefined;
    const parts = body.portableParts();
    if (parts === undefined) return undefined;
    const complete = await this.#streamer.write(socket, status, headers, parts);
    if (complete === undefined) return undefined;
    this.#metrics.streamed();
    for (const part of parts) if (Buffer.isBuffer(part)) release(part);
    discard(body); // unpins the segments
    return complete;
  }

  /**
   * Drops every kept response and resets the connections of those being written (the
   * worker is closing): a client never takes what the close leaves for a whole body.
   */
  close(): void {
    for (const ticket of [...this.#parked.keys()]) this.#drop(ticket);
    for (const socket of this.#writing) cutShort(socket);
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
