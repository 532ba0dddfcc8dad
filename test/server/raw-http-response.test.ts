// The records handoff's response writer on real TCP sockets: framing from the body
// (content-length for buffers, chunked for a stream), `connection: close`, headers merged
// with the caller's framing left out, each piece released once the socket took it, and a
// body that fails midway cutting the response short instead of ending it.
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { crc32 } from "../../buffers/crc32.ts";
import { releasable } from "../../buffers/release.ts";
import {
  adoptSocket,
  writeErrorResponse,
  writeRawResponse,
  type RawBody,
  type RawHeaders,
} from "../../server/handoff/raw-http-response.ts";
import { rawGet, type RawResponse } from "../helpers/raw-http.ts";

let server: Server;
let url = "";
let respond: (socket: Socket) => void = (socket) => socket.destroy();

test.before(async () => {
  server = createServer((socket) => {
    // The request is never parsed, as in the worker: the response goes out at once.
    adoptSocket(socket);
    respond(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

test.after(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** One response written by writeRawResponse; resolves with what the client read and what the writer said. */
async function exchange(
  status: number,
  headers: RawHeaders[],
  body: RawBody,
): Promise<{ res: RawResponse; complete: boolean; bytes: number }> {
  let written!: Promise<boolean>;
  let bytes = 0;
  respond = (socket) => {
    written = writeRawResponse(socket, status, headers, body, (n) => (bytes += n));
  };
  const res = await rawGet(url, "/");
  return { res, complete: await written, bytes };
}

test("buffers go out with content-length, merged headers and connection: close; each piece is released", async () => {
  const released: string[] = [];
  const piece = (text: string) => releasable(Buffer.from(text), () => released.push(text));
  const { res, complete, bytes } = await exchange(
    200,
    [
      { "x-tito-shard": "1", "x-tito-instance": "abc", "Content-Length": "999", connection: "keep-alive" },
      { "content-type": "application/json", "transfer-encoding": "gzip", "x-bad": "a\r\nset-cookie: x=1" },
    ],
    [piece('{"a":'), piece(""), piece("[1,2]}")],
  );
  assert.ok(complete);
  assert.is(res.status, 200);
  assert.is(res.body.toString(), '{"a":[1,2]}');
  assert.ok(res.complete);
  assert.is(bytes, 11);
  assert.is(res.headers["content-length"], "11", "the writer's framing, never the caller's");
  assert.is(res.headers["connection"], "close");
  assert.is(res.headers["transfer-encoding"], undefined);
  assert.is(res.headers["x-tito-shard"], "1");
  assert.is(res.headers["content-type"], "application/json");
  assert.ok(res.headers["date"]);
  assert.is(res.headers["x-bad"], undefined, "a header with a line break is left out");
  assert.is(res.headers["set-cookie"], undefined);
  assert.equal(released.sort(), ["", "[1,2]}", '{"a":']);
});

test("a stream goes out chunked, empty pieces skipped, ended by the last chunk", async () => {
  const released: string[] = [];
  async function* body() {
    yield releasable(Buffer.from("one,"), () => released.push("one"));
    yield Buffer.alloc(0);
    yield Buffer.from("two,".repeat(50_000));
    yield releasable(Buffer.from("three"), () => released.push("three"));
  }
  const { res, complete, bytes } = await exchange(200, [{ "content-type": "application/json" }], body());
  assert.ok(complete);
  assert.ok(res.chunked);
  assert.ok(res.complete, "the terminating chunk arrived");
  assert.is(res.body.toString(), `one,${"two,".repeat(50_000)}three`);
  assert.is(bytes, res.body.length);
  assert.is(res.headers["trailer"], "x-tito-body-bytes, x-tito-body-crc32", "the trailers are announced");
  assert.is(res.trailers["x-tito-body-bytes"], String(res.body.length));
  assert.is(res.trailers["x-tito-body-crc32"], crc32(res.body).toString(16).padStart(8, "0"));
  assert.is(res.headers["content-length"], undefined);
  assert.is(res.headers["connection"], "close");
  assert.equal(released, ["one", "three"]);
});

test("a stream that fails midway destroys the socket: the client sees no last chunk", async () => {
  let stopped = false;
  async function* body() {
    try {
      yield Buffer.from("partial");
      throw new Error("journal read failed");
    } finally {
      stopped = true;
    }
  }
  const { res, complete } = await exchange(200, [], body());
  assert.is(complete, false);
  assert.ok(res.chunked);
  assert.is(res.complete, false, "no terminating chunk: the body is visibly cut short");
  assert.is(res.body.toString(), "partial");
  assert.ok(stopped);
});

test("a client that leaves midway stops the stream and releases what was not sent", async () => {
  const released: number[] = [];
  let stopped!: () => void;
  const done = new Promise<void>((resolve) => (stopped = resolve));
  let socketOf!: Socket;
  async function* body() {
    try {
      for (let i = 0; ; i++) {
        if (i === 2) socketOf.destroy(); // the client's connection is gone from here on
        yield releasable(Buffer.alloc(64 * 1024, i), () => released.push(i));
      }
    } finally {
      stopped();
    }
  }
  let written!: Promise<boolean>;
  respond = (socket) => {
    socketOf = socket;
    written = writeRawResponse(socket, 200, [], body());
  };
  await rawGet(url, "/").catch(() => undefined);
  assert.is(await written, false);
  await done;
  assert.equal(released, [0, 1, 2], "every piece the stream yielded was released, sent or not");
});

test("writeErrorResponse: the router's JSON error shape, its headers first", async () => {
  const refusal = { status: 503, code: "TITO_ERR_WORKER_UNAVAILABLE", message: "session worker unavailable" };
  respond = (socket) => writeErrorResponse(socket, { "x-tito-instance": "abc" }, refusal);
  const res = await rawGet(url, "/");
  assert.is(res.status, 503);
  assert.equal(JSON.parse(res.body.toString()), { error: "session worker unavailable", code: refusal.code });
  assert.is(res.headers["content-type"], "application/json; charset=utf-8");
  assert.is(res.headers["x-tito-instance"], "abc");
  assert.is(res.headers["connection"], "close");
});

test.run();
