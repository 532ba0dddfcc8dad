// The router's side of the records handoff (docs/architecture.md, "The records handoff"):
// a records GET over plain HTTP/1.1 asks its worker to keep the response (a ticket in the
// get op); when the worker says it did, the client's socket goes to the host over IPC, and
// from the host to that worker, which writes the response itself. The router then forgets
// the connection: it never copies the records' bytes. Built only where there is an IPC
// channel to the host (router-main.ts); without one, every GET is relayed as before.
import { Socket } from "node:net";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { RecordsHandoff } from "../handoff/records-handoff-message.ts";
import { WorkerUnavailableError } from "./errors.ts";
import { errorBody, JSON_TYPE } from "./error-reply.ts";
import type { RouterMetrics } from "./router-metrics.ts";

/** What the client gets when the worker exited before it took the socket (the same for every shard). */
const refusedBy = (shard: number) => new WorkerUnavailableError(shard, "exited before it took the records socket");
const REFUSAL: RecordsHandoff["refusal"] = (({ status, code, message }) => ({ status, code, message }))(refusedBy(0));

/** Sends the socket to the host; our copy stays open until `callback` (router-main.ts). */
export type SendSocket = (message: RecordsHandoff, socket: Socket, callback: (err: Error | null) => void) => void;

export class SocketHandoff {
  readonly #send: SendSocket;
  #tickets = 0;

  constructor(send: SendSocket) {
    this.#send = send;
  }

  /**
   * A ticket when this request's socket can be handed off: a GET (never a HEAD) over
   * HTTP/1.1 on a plain TCP socket. Otherwise undefined, and the response is relayed.
   */
  ticketFor(request: FastifyRequest): string | undefined {
    const raw = request.raw;
    const socket = raw.socket;
    if (raw.method !== "GET" || raw.httpVersion !== "1.1") return undefined;
    if (!(socket instanceof Socket) || "encrypted" in socket || socket.destroyed) return undefined;
    return `${process.pid}-${++this.#tickets}`;
  }

  /**
   * Hands the client's socket to worker `shard`, incarnation `epoch`, which kept the
   * response under `ticket`. The reply is hijacked: the router writes nothing more on it.
   */
  handOff(
    reply: FastifyReply,
    to: { shard: number; epoch: number; ticket: string },
    metrics: RouterMetrics | undefined,
  ): FastifyReply {
    reply.hijack();
    const socket = reply.raw.socket;
    // The client left: the worker drops the response it kept when nobody claims it.
    if (!(socket instanceof Socket) || socket.destroyed) return reply;
    stopReading(socket);
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(reply.getHeaders()))
      if (value !== undefined) headers[name] = typeof value === "number" ? String(value) : value;
    const message: RecordsHandoff = { type: "records-handoff", ...to, headers, refusal: REFUSAL };
    this.#send(message, socket, (err) => {
      if (err === null) {
        // The host holds the connection now. Closing our copy ends this request for the
        // HTTP server and Fastify (and the in-flight gauge); the response never finishes
        // here, so Fastify's onResponse hook does not count it: counted as the 200 it is.
        socket.destroy();
        const route = reply.request.routeOptions.url ?? "unmatched";
        metrics?.requests.inc({ route, method: "GET", status: "200" });
        metrics?.handoffs.inc({ shard: String(to.shard) });
        return;
      }
      // Not sent (the host is going away): the socket is still ours to answer on.
      const refused = refusedBy(to.shard);
      reply.raw.writeHead(refused.status, { ...headers, "content-type": JSON_TYPE, connection: "close" });
      reply.raw.end(errorBody(refused));
    });
    return reply;
  }
}

/**
 * Stops the HTTP server reading the socket before it leaves. Its parser reads the socket
 * natively, which socket.pause() does not stop, and a FIN read now (a client that
 * half-closes after its request) would make the server end our half of the connection
 * that the worker is about to answer on. Until the send completes the router keeps its
 * copy of the socket open (keepOpen): with Node's default, the server would count the
 * connection out twice and never close its response object.
 */
function stopReading(socket: Socket): void {
  (socket as unknown as { _handle?: { readStop?: () => number } | null })._handle?.readStop?.();
}
