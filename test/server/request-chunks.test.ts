// The router's body parser (server/router/request-chunks.ts): a body arrives as the
// chunks it came in, not joined, over a real socket; Fastify's limits hold with its errors.
import { test } from "uvu";
import * as assert from "uvu/assert";
import Fastify from "fastify";
import { connect } from "node:net";
import { chunksParser, joinedBody } from "../../server/router/request-chunks.ts";
import { adminBody } from "../../server/router/router-admin.ts";

const LIMIT = 1 << 20;

async function app() {
  const server = Fastify({ bodyLimit: LIMIT });
  server.removeAllContentTypeParsers();
  server.addContentTypeParser("*", { bodyLimit: LIMIT }, chunksParser(LIMIT));
  server.setErrorHandler((err: Error & { code?: string; statusCode?: number }, _req, reply) =>
    reply.code(err.statusCode ?? 500).send({ code: err.code }),
  );
  server.post("/echo", (request, reply) => {
    const body = request.body as Buffer[];
    reply.send({
      array: Array.isArray(body),
      chunks: Array.isArray(body) ? body.length : 0,
      bytes: joinedBody(body)?.toString("base64") ?? null,
    });
  });
  const url = await server.listen({ port: 0, host: "127.0.0.1" });
  return { server, url, port: Number(new URL(url).port) };
}

/**
 * One raw HTTP/1.1 request written in `pieces` a tick apart; the whole response text. A
 * server that answers early (a 413) and closes may reset the rest of our writes (EPIPE,
 * ECONNRESET): once its response has come, that is the end of the exchange, not a failure.
 */
function raw(port: number, head: string, pieces: Buffer[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    socket.on("data", (d) => (text += d.toString("latin1")));
    socket.on("end", () => resolve(text));
    socket.on("error", (err) => (text.startsWith("HTTP/1.1 ") ? resolve(text) : reject(err)));
    socket.write(head);
    let i = 0;
    const next = () => {
      if (i === pieces.length || text !== "" || socket.destroyed) return; // answered: stop sending
      socket.write(pieces[i++]!, (err) => err || setTimeout(next, 5));
    };
    next();
  });
}

const bodyOf = (response: string) =>
  JSON.parse(response.slice(response.indexOf("\r\n\r\n") + 4)) as Record<string, unknown>;

test("a body that came in several pieces is the list of them, its bytes exact", async () => {
  const { server, port } = await app();
  try {
    const pieces = [Buffer.from('{"a":"'), Buffer.from("x".repeat(100_000)), Buffer.from('é"}')];
    const length = pieces.reduce((n, p) => n + p.length, 0);
    const head = `POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nconnection: close\r\n\r\n`;
    const got = bodyOf(await raw(port, head, pieces));
    assert.is(got.array, true, "a list of chunks, not one joined Buffer");
    assert.ok((got.chunks as number) > 1, `${String(got.chunks)} chunks`);
    assert.ok(got.bytes === Buffer.concat(pieces).toString("base64"), "the same bytes");
  } finally {
    await server.close();
  }
});

test("over the limit: declared (content-length) or received (chunked), Fastify's 413", async () => {
  const { server, url, port } = await app();
  try {
    const declared = await fetch(`${url}/echo`, { method: "POST", body: Buffer.alloc(LIMIT + 1) });
    assert.is(declared.status, 413);
    assert.is(((await declared.json()) as { code: string }).code, "FST_ERR_CTP_BODY_TOO_LARGE");
    const chunk = Buffer.alloc(256 * 1024, 0x61);
    const pieces = Array.from({ length: 5 }, () =>
      Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")]),
    );
    pieces.push(Buffer.from("0\r\n\r\n"));
    const head = "POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    const response = await raw(port, head, pieces);
    assert.ok(response.startsWith("HTTP/1.1 413"), response.slice(0, 40));
    assert.is(bodyOf(response).code, "FST_ERR_CTP_BODY_TOO_LARGE");
  } finally {
    await server.close();
  }
});

test("an admin body in chunks reads as one JSON object", () => {
  assert.equal(adminBody([Buffer.from('{"in_fl'), Buffer.from('ight":"abort"}')], ["in_flight"]), {
    in_flight: "abort",
  });
  assert.equal(adminBody([], ["in_flight"]), {});
  assert.equal(adminBody(undefined, ["in_flight"]), {});
});

test.run();
