// The simulated engine's HTTP helpers: replies written as chunks or event streams, the
// time a reply that is not streamed takes, and each route's error shape.
import { setTimeout as sleep } from "node:timers/promises";
import { Readable } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";

/** An event stream, written as the generator yields (a client that goes away stops it). */
export function sendStream(reply: FastifyReply, events: AsyncGenerator<Buffer>): FastifyReply {
  reply.type("text/event-stream; charset=utf-8").header("cache-control", "no-cache");
  return reply.send(Readable.from(events, { objectMode: false }));
}

/** A reply that is not streamed comes after all its tokens. */
export const tokensTime = (options: { tokenMs?: number }, tokens: number) =>
  options.tokenMs ? sleep(options.tokenMs * tokens) : undefined;

export function send(reply: FastifyReply, chunks: Buffer[], length?: number): FastifyReply {
  reply.type("application/json");
  if (chunks.length === 1) return reply.send(chunks[0]);
  // Several chunks: stream them as they are, never concatenated (payloads can be 100+ MiB).
  reply.header("content-length", length ?? chunks.reduce((n, c) => n + c.length, 0));
  return reply.send(Readable.from(chunks, { objectMode: false }));
}

type ErrorBody = (message: string, status: number) => unknown;

/** A route's error handler that answers in its engine's error shape. */
export function errorShape(body: ErrorBody) {
  return (err: Error & { statusCode?: number }, _request: FastifyRequest, reply: FastifyReply) => {
    const status = err.statusCode && err.statusCode >= 400 ? err.statusCode : 500;
    reply.code(status).send(body(err.message, status));
  };
}
