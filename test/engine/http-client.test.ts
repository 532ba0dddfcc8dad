// The engine HTTP/1.1 client against a scripted raw server, so every framing case is
// exercised byte by byte: heads and bodies split at any byte, chunked bodies with
// extensions and trailers, 1xx heads, bodies read to the close, keep-alive reuse, a
// kept-alive connection the server closed (sent again once), replies cut short, bytes
// that are not HTTP, aborts, and large replies read into pooled slabs. The one table runs
// twice: over plain TCP (http:) and over TLS (https:, a self-signed certificate the agent
// is given as its CA), since both schemes are served by the same client.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import { EngineHttpAgent } from "../../engine/http-client.ts";
import { ReplyBuffers, SLAB_BYTES } from "../../engine/reply-buffers.ts";
import { crc32 } from "../../buffers/crc32.ts";

interface Seen {
  head: string;
  body: Buffer;
  conn: number;
}
type Script = (socket: Socket, seen: Seen) => void | Promise<void>;

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url));
const TLS = { key: fixture("tls-selfsigned.key"), cert: fixture("tls-selfsigned.crt") };

let server: Server;
let origin: URL;
/** A client for `url` that trusts the test certificate. */
const agentFor = (url: URL, connectTimeoutMs?: number) =>
  new EngineHttpAgent(url, { connectTimeoutMs, tls: { ca: TLS.cert } });
let script: Script;
let seen: Seen[] = [];
let connections = 0;

// Reads requests off each connection (head + content-length body) and runs the script.
function serve(socket: Socket): void {
  const conn = ++connections;
  let buf = Buffer.alloc(0);
  socket.on("error", () => {});
  socket.on("data", (d) => void onData(d));
  const onData = async (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buf.toString("latin1", 0, end);
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      const req = { head, body: buf.subarray(end + 4, end + 4 + length), conn };
      buf = buf.subarray(end + 4 + length);
      seen.push(req);
      await script(socket, req);
    }
  };
}

/** Writes `text` one piece at a time, each after the last has gone out. */
async function dribble(socket: Socket, pieces: (string | Buffer)[]): Promise<void> {
  for (const p of pieces) {
    socket.write(p);
    await new Promise((r) => setImmediate(r));
  }
}

/** The offsets of every '"' in `parts` joined: what the client must have indexed. */
function quoteOffsets(parts: Buffer[]): number[] {
  const all = Buffer.concat(parts);
  const out: number[] = [];
  for (let i = 0; i < all.length; i++) if (all[i] === 0x22) out.push(i);
  return out;
}

const ok = (body: string, extra = "") =>
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
const text = (parts: Buffer[]) => Buffer.concat(parts).toString();

function table(scheme: "http" | "https"): void {
  const test = suite(`engine client over ${scheme}`);

  test.before(async () => {
    server = scheme === "http" ? createServer(serve) : createTlsServer(TLS, serve);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    origin = new URL(`${scheme}://127.0.0.1:${port}`);
  });
  test.after(() => new Promise<void>((r) => server.close(() => r())));
  test.before.each(() => {
    seen = [];
  });

  test("a content-length reply split at every byte; the next request reuses the connection", async () => {
    const agent = agentFor(origin);
    script = (socket) => dribble(socket, [...ok('{"a":1}', "x-one: 1\r\nx-one: 2\r\n")]);
    const r1 = await agent.send({
      method: "POST",
      path: "/v1/chat/completions?x=1",
      headers: { "content-type": "application/json", "x-trace": "t" },
      body: Buffer.from('{"q":1}'),
    });
    assert.is(r1.status, 200);
    assert.is(text(r1.body), '{"a":1}');
    assert.is(r1.headers["x-one"], "1, 2", "repeated headers are joined");
    assert.equal(r1.quotes, [1, 3], "quotes indexed across a body read byte by byte");
    assert.is(r1.crc, crc32(Buffer.from('{"a":1}')), "the CRC chained across single-byte reads");
    assert.match(seen[0]!.head, /^POST \/v1\/chat\/completions\?x=1 HTTP\/1\.1\r\n/);
    assert.match(seen[0]!.head, new RegExp(`\\r\\nhost: ${origin.host}\\r\\n`));
    assert.match(seen[0]!.head, /\r\ncontent-length: 7(\r\n|$)/);
    assert.match(seen[0]!.head, /\r\nx-trace: t\r\n/);
    assert.is(seen[0]!.body.toString(), '{"q":1}');
    script = (socket) => void socket.write(ok('{"b":2}'));
    const r2 = await agent.send({ method: "GET", path: "/v1/models", headers: {} });
    assert.is(text(r2.body), '{"b":2}');
    assert.is(seen[1]!.conn, seen[0]!.conn, "kept alive and reused");
    assert.not.match(seen[1]!.head, /content-length/, "a GET without a body sends no length");
    await agent.close();
  });

  test("chunked: extensions, odd splits and trailers; 1xx heads are skipped", async () => {
    const agent = agentFor(origin);
    const wire =
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nx-trailer: t\r\n\r\n";
    script = (socket) =>
      dribble(socket, [wire.slice(0, 30), wire.slice(30, 75), wire.slice(75, 76), wire.slice(76, 90), wire.slice(90)]);
    const r = await agent.send({ method: "POST", path: "/c", headers: {}, body: Buffer.from("x") });
    assert.is(r.status, 200);
    assert.is(text(r.body), "hello 0123456789");
    assert.equal(r.quotes, []);
    assert.is(r.crc, crc32(Buffer.from("hello 0123456789")), "the CRC of the chunk data only");
    assert.is(r.headers["transfer-encoding"], "chunked");
    script = (socket) => void socket.write(ok("again"));
    assert.is(
      text((await agent.send({ method: "GET", path: "/", headers: {} })).body),
      "again",
      "the connection is in step after the trailers",
    );
    assert.is(seen[1]!.conn, seen[0]!.conn);
    await agent.close();
  });

  test("no length: the body runs to the close, and the connection is not reused", async () => {
    const agent = agentFor(origin);
    script = async (socket) => {
      await dribble(socket, ["HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall ", "of ", "it"]);
      socket.end();
    };
    const r = await agent.send({ method: "GET", path: "/", headers: {} });
    assert.is(text(r.body), "all of it");
    script = (socket) => void socket.write(ok("next"));
    await agent.send({ method: "GET", path: "/", headers: {} });
    assert.is.not(seen[1]!.conn, seen[0]!.conn);
    await agent.close();
  });

  test("204 and HEAD have no body; `connection: close` is honoured", async () => {
    const agent = agentFor(origin);
    script = (socket) => void socket.write("HTTP/1.1 204 No Content\r\n\r\n");
    assert.equal((await agent.send({ method: "DELETE", path: "/x", headers: {} })).body, []);
    script = (socket) => void socket.write("HTTP/1.1 200 OK\r\ncontent-length: 12\r\nconnection: close\r\n\r\n");
    const head = await agent.send({ method: "HEAD", path: "/x", headers: {} });
    assert.is(head.status, 200);
    assert.equal(head.body, []);
    script = (socket) => void socket.write(ok("fresh"));
    await agent.send({ method: "GET", path: "/", headers: {} });
    assert.is.not(seen[2]!.conn, seen[1]!.conn, "closed after `connection: close`");
    await agent.close();
  });

  test("a large reply is read into pooled slabs, byte for byte, and released once", async () => {
    const agent = agentFor(origin);
    const pool = new ReplyBuffers({ keepBytes: 8 * SLAB_BYTES });
    const payload = Buffer.alloc(3 * 2 ** 20 + 12345);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 13 + (i >> 11)) & 0xff; // quotes every few hundred bytes
    script = (socket) => {
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${payload.length}\r\n\r\n`);
      socket.write(payload.subarray(0, 100)); // some of the body arrives with the head
      setTimeout(() => socket.write(payload.subarray(100)), 5);
    };
    const r = await agent.send({ method: "POST", path: "/big", headers: {}, body: Buffer.from("{}"), pooled: pool });
    assert.ok(r.release, "a pooled reply comes with release()");
    assert.ok(r.body.length >= 4 && r.body.every((b) => b.length <= 2 ** 20), "the body is the slabs");
    assert.ok(Buffer.concat(r.body).equals(payload));
    assert.equal(
      r.quotes,
      quoteOffsets(r.body),
      "every quote indexed, at its offset, across slabs and the head's read",
    );
    assert.is(r.crc, crc32(payload), "the body's CRC-32, computed as it arrived");
    r.release!();
    r.release!();
    assert.is(pool.pooled, 4, "every slab back once");
    const small = await (async () => {
      script = (socket) => void socket.write(ok("small"));
      return agent.send({ method: "POST", path: "/s", headers: {}, pooled: pool });
    })();
    assert.is(small.release, undefined, "small replies are not pooled");
    assert.is(text(small.body), "small");
    await agent.close();
  });

  test("a reply over the worker's reply budget is not read until an earlier one is released", async () => {
    const agent = agentFor(origin);
    const pool = new ReplyBuffers({ budgetBytes: 3 * SLAB_BYTES });
    const payload = (seed: number) => {
      const b = Buffer.alloc(2 * SLAB_BYTES + 777);
      for (let i = 0; i < b.length; i++) b[i] = (i * 7 + seed) & 0xff;
      return b;
    };
    const bodies = [payload(1), payload(2)];
    let wrote = 0;
    script = (socket, req) => {
      const body = bodies[Number(req.head.split(" ")[1]!.slice(1))]!;
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
      socket.write(body, () => wrote++);
    };
    const first = await agent.send({ method: "POST", path: "/0", headers: {}, pooled: pool });
    let second: Awaited<ReturnType<EngineHttpAgent["send"]>> | undefined;
    const pending = agent.send({ method: "POST", path: "/1", headers: {}, pooled: pool }).then((r) => (second = r));
    for (let i = 0; i < 200 && pool.waiting === 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.is(pool.waiting, 1, "the second reply's head came; it waits for room");
    await new Promise((r) => setTimeout(r, 100));
    assert.is(second, undefined, "its body is not read while the first is held");
    assert.ok(pool.allocated <= 4, `at most the first reply's slabs and one more: ${pool.allocated}`);
    assert.ok(Buffer.concat(first.body).equals(bodies[0]!));
    first.release!();
    await pending;
    assert.ok(Buffer.concat(second!.body).equals(bodies[1]!), "then it is read, byte for byte");
    assert.ok(wrote >= 1);
    second!.release!();
    assert.is(pool.reserved, 0);
    await agent.close();
  });

  test("a reply cut short is ECONNRESET; a reply that is not HTTP is TITO_ENGINE_HTTP", async () => {
    const agent = agentFor(origin);
    script = (socket) => {
      socket.write("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789");
      setTimeout(() => socket.destroy(), 5);
    };
    const cut = await agent.send({ method: "POST", path: "/", headers: {} }).catch((e) => e);
    assert.is(cut.code, "ECONNRESET");
    assert.match(cut.message, /before the reply was complete/);
    script = (socket) => void socket.write("SSH-2.0-OpenSSH\r\n\r\n");
    const bad = await agent.send({ method: "POST", path: "/", headers: {} }).catch((e) => e);
    assert.is(bad.code, "TITO_ENGINE_HTTP");
    script = (socket) => void socket.write("HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n");
    assert.is((await agent.send({ method: "GET", path: "/", headers: {} }).catch((e) => e)).code, "TITO_ENGINE_HTTP");
    script = (socket) => void socket.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n");
    assert.is((await agent.send({ method: "GET", path: "/", headers: {} }).catch((e) => e)).code, "TITO_ENGINE_HTTP");
    assert.is(agent.connections, 0, "no failed connection is kept");
    await agent.close();
  });

  test("a kept-alive connection the engine closed as it was reused: the request goes once more, on a new one", async () => {
    const agent = agentFor(origin);
    let n = 0;
    const before = connections;
    script = (socket) => {
      n++;
      if (n === 2) return void socket.destroy(); // the race: our request met a closing connection
      socket.write(ok(`reply ${n}`));
    };
    assert.is(text((await agent.send({ method: "GET", path: "/", headers: {} })).body), "reply 1");
    const r2 = await agent.send({ method: "POST", path: "/", headers: {}, body: Buffer.from("{}") });
    assert.is(text(r2.body), "reply 3");
    assert.is(connections - before, 2, "a fresh connection took the request");
    assert.is(seen[1]!.body.toString(), "{}");
    assert.is(seen[2]!.body.toString(), "{}", "sent again as it was");

    // On a fresh connection nothing is retried: the failure is the engine's.
    script = (socket) => void socket.destroy();
    const fresh = agentFor(origin);
    const err = await fresh.send({ method: "POST", path: "/", headers: {} }).catch((e) => e);
    assert.is(err.code, "ECONNRESET");
    await fresh.close();
    await agent.close();
  });

  test("an abort mid-reply rejects with the reason and drops the connection", async () => {
    const agent = agentFor(origin);
    script = (socket) => void socket.write("HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\npartial");
    const controller = new AbortController();
    const pending = agent.send({ method: "POST", path: "/", headers: {}, signal: controller.signal });
    await new Promise((r) => setTimeout(r, 20));
    const reason = new Error("gave up");
    controller.abort(reason);
    assert.is(await pending.catch((e) => e), reason);
    assert.is(agent.connections, 0);
    await agent.close();
  });

  test("a header that could split the request is refused before anything is sent", async () => {
    const agent = agentFor(origin);
    const err = await agent
      .send({ method: "POST", path: "/", headers: { "x-evil": "a\r\nx-injected: 1" } })
      .catch((e) => e);
    assert.instance(err, TypeError);
    assert.is(seen.length, 0);
    assert.throws(() => new EngineHttpAgent(new URL("ftp://example.com")), /http and https, not ftp:/);
    await agent.close();
  });

  test("an unreachable engine rejects with the socket's code", async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const { port } = probe.address() as { port: number };
    await new Promise<void>((r) => probe.close(() => r()));
    const agent = agentFor(new URL(`${scheme}://127.0.0.1:${port}`));
    const err = await agent.send({ method: "GET", path: "/", headers: {} }).catch((e) => e);
    assert.is(err.code, "ECONNREFUSED");
    await agent.close();
  });

  // A TCP peer that accepts and never speaks: a plain connection is up at once on loopback,
  // so the case is the TLS handshake's (over http the same silence is a reply timeout).
  if (scheme === "https")
    test("a connection that is not up within the connect timeout fails its request at once", async () => {
      const silent = createServer((socket) => socket.resume()); // reads, never answers
      await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
      const { port } = silent.address() as { port: number };
      const agent = agentFor(new URL(`https://127.0.0.1:${port}`), 150);
      const started = Date.now();
      const err = await agent.send({ method: "GET", path: "/", headers: {} }).catch((e) => e);
      assert.is(err.code, "TITO_ENGINE_CONNECT_TIMEOUT");
      assert.match(err.message, /within 150 ms/);
      assert.ok(Date.now() - started < 5_000, "failed by the connect timeout, not a later one");
      assert.is(agent.connections, 0);
      await agent.close();
      await new Promise<void>((r) => silent.close(() => r()));
    });

  test.run();
}

table("http");
table("https");
