// The router's body parser: a request body as the chunks it arrived in, never joined. The
// router parses no body it relays (router-relay.ts), and the channel to a worker writes a
// list of Buffers as it is (transport/body-plan.ts), so Fastify's `parseAs: "buffer"`
// concat was a copy of every body for nothing: at 80k tokens of history, ~500 KB per chat
// turn (docs/benchmark-history.md, issue 47). Each chunk is its own memory (Node's HTTP
// parser copies every body piece out of the socket's read), so keeping them is safe.
// The limits are Fastify's own, with its errors (error-reply.ts maps them): a declared or
// received length over the limit is FST_ERR_CTP_BODY_TOO_LARGE, a body that ends short of
// or past its content-length FST_ERR_CTP_INVALID_CONTENT_LENGTH, a stream error a 400.
import { errorCodes, type FastifyRequest } from "fastify";

type Done = (err: Error | null, body?: Buffer[]) => void;

/** A content-type parser for `addContentTypeParser` (without `parseAs`): the body as `Buffer[]`. */
export function chunksParser(bodyLimit: number) {
  return (request: FastifyRequest, payload: NodeJS.ReadableStream, done: Done): void => {
    const contentLength = Number(request.headers["content-length"]);
    if (contentLength > bodyLimit) return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = () => {
      payload.removeListener("data", onData);
      payload.removeListener("end", onEnd);
      payload.removeListener("error", onEnd);
    };
    function onData(chunk: Buffer | string): void {
      const piece = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      received += piece.length;
      if (received > bodyLimit) {
        stop();
        done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
        return;
      }
      chunks.push(piece);
    }
    function onEnd(err?: Error & { statusCode?: number }): void {
      stop();
      if (err != null) {
        if (!(typeof err.statusCode === "number" && err.statusCode >= 400)) err.statusCode = 400;
        return done(err);
      }
      if (!Number.isNaN(contentLength) && received !== contentLength)
        return done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      done(null, chunks);
    }
    payload.on("data", onData);
    payload.on("end", onEnd);
    payload.on("error", onEnd);
    payload.resume();
  };
}

/** A parsed body as one Buffer (an admin route's small JSON), or undefined when there was none. */
export function joinedBody(body: unknown): Buffer | undefined {
  if (Buffer.isBuffer(body)) return body;
  if (Array.isArray(body)) return body.length === 1 ? (body[0] as Buffer) : Buffer.concat(body as Buffer[]);
  return undefined;
}
