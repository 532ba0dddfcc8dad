// The floor for `npm run bench:hop` (issue 20): the same process chain as tito-server's
// proxied request with nothing of tito-server in it. An HTTP router process (node:http),
// one Unix socket, and a worker process that calls the engine over keep-alive HTTP
// (node:http's Agent). No sessions, no framework, no msgpack: a frame is
// [u32 length][u32 request id][payload], the payload being [u16 path length][path][the
// request's body] one way and [u16 status][body] the other. What the proxied request adds
// over a direct engine call, minus what this chain adds, is what tito-server's own code
// costs. A path with `?reply=N` (bench:hop's every-route part, bench/hop-routes.ts) is
// answered with N bytes, the engine's reply first, so the floor relays a route's own
// request body and reply size; the engine is asked for the path without the query.
//
//   node --import tsx bench/bare-topology.ts worker --socket PATH --engine URL
//   node --import tsx bench/bare-topology.ts router --socket PATH
//
// Each prints one ready line on stdout ("bare-worker ready url=…", "bare-router ready url=…")
// and exits on SIGTERM. A request for /sessions/{id}/<rest> is relayed as /<rest>.
import { request as httpRequest, Agent, createServer as createHttpServer } from "node:http";
import { createConnection, createServer as createNetServer, type Socket } from "node:net";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

const HEADER = 8;

/** Splits a byte stream into frames; calls `onFrame(id, payload)` for each whole one. */
function frameReader(onFrame: (id: number, payload: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= HEADER) {
      const length = pending.readUInt32LE(0);
      if (pending.length < HEADER + length) break;
      onFrame(pending.readUInt32LE(4), pending.subarray(HEADER, HEADER + length));
      pending = pending.subarray(HEADER + length);
    }
  };
}

function writeFrame(socket: Socket, id: number, payload: Buffer): void {
  const header = Buffer.allocUnsafe(HEADER);
  header.writeUInt32LE(payload.length, 0);
  header.writeUInt32LE(id, 4);
  socket.write(Buffer.concat([header, payload]));
}

/** A request frame's payload: [u16 path length][path][body]. */
export function requestPayload(path: string, body?: Buffer): Buffer {
  const bytes = Buffer.from(path, "utf8");
  const head = Buffer.allocUnsafe(2);
  head.writeUInt16LE(bytes.length, 0);
  return Buffer.concat(body === undefined ? [head, bytes] : [head, bytes, body]);
}

/** The engine's reply as the client's reply: `size` bytes when the path asked for a size. */
function sized(engineBody: Buffer, size: number | undefined): Buffer {
  if (size === undefined) return engineBody;
  const out = Buffer.alloc(size, 0x20);
  engineBody.copy(out, 0, 0, Math.min(size, engineBody.length));
  return out;
}

function worker(socketPath: string, engineUrl: string): void {
  const engine = new URL(engineUrl);
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  const server = createNetServer((socket) => {
    socket.on(
      "data",
      frameReader((id, payload) => {
        const target = payload.toString("utf8", 2, 2 + payload.readUInt16LE(0)); // the body after it is not read
        const q = target.indexOf("?reply=");
        const path = q < 0 ? target : target.slice(0, q);
        const size = q < 0 ? undefined : Number(target.slice(q + 7));
        const req = httpRequest({ host: engine.hostname, port: engine.port, path, method: "GET", agent }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const status = Buffer.allocUnsafe(2);
            status.writeUInt16LE(res.statusCode ?? 502, 0);
            writeFrame(socket, id, Buffer.concat([status, sized(Buffer.concat(chunks), size)]));
          });
        });
        req.on("error", () => writeFrame(socket, id, Buffer.from([0xf6, 0x01]))); // 502
        req.end();
      }),
    );
  });
  server.listen(socketPath, () => process.stdout.write(`bare-worker ready url=${socketPath}\n`));
  process.once("SIGTERM", () => {
    agent.destroy();
    server.close();
    process.exit(0);
  });
}

function router(socketPath: string): void {
  const link = createConnection(socketPath);
  const waiting = new Map<number, (status: number, body: Buffer) => void>();
  let nextId = 0;
  link.on(
    "data",
    frameReader((id, payload) => {
      const done = waiting.get(id);
      waiting.delete(id);
      done?.(payload.readUInt16LE(0), payload.subarray(2));
    }),
  );
  const server = createHttpServer((req, res) => {
    const path = (req.url ?? "/").replace(/^\/sessions\/[^/]+/, "");
    const id = nextId++ >>> 0;
    waiting.set(id, (status, body) => {
      res.writeHead(status, { "content-type": "application/json", "content-length": body.length });
      res.end(body);
    });
    // The body (a chat turn's) goes on in the frame, as a relay must; a GET has none.
    const body: Buffer[] = [];
    req.on("data", (chunk: Buffer) => body.push(chunk));
    req.on("end", () =>
      writeFrame(link, id, requestPayload(path, body.length === 0 ? undefined : Buffer.concat(body))),
    );
  });
  server.keepAliveTimeout = 60_000;
  link.once("connect", () =>
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      process.stdout.write(`bare-router ready url=http://127.0.0.1:${port}\n`);
    }),
  );
  process.once("SIGTERM", () => {
    link.destroy();
    server.close();
    process.exit(0);
  });
}

// Run as a script (bench:hop spawns it); imported, only requestPayload is wanted.
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { socket: { type: "string" }, engine: { type: "string" } },
  });
  if (positionals[0] === "worker" && values.socket && values.engine) worker(values.socket, values.engine);
  else if (positionals[0] === "router" && values.socket) router(values.socket);
  else {
    process.stderr.write("usage: bare-topology.ts worker --socket PATH --engine URL | router --socket PATH\n");
    process.exit(2);
  }
}
