// A records body that cannot be read to its end never looks complete (docs/http.md, "GET
// /sessions/{id}"), judged by an outside client (test/helpers/records-get.ts): the writer
// (server/handoff/raw-http-response.ts) over real journal-like files and real TCP sockets, when the
// stream is stopped early by someone else, when its file is truncated under it, or when a
// read fails (a file that cannot be read, like a disk error); and a real server whose
// journal segment is truncated under a streaming GET, handed off and relayed.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { adoptSocket, writeRawResponse } from "../../server/handoff/raw-http-response.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { RecordStream, type BodyPart } from "../../sessions/journal/record-stream.ts";
import { recordsGet, type RecordsGet } from "../helpers/records-get.ts";
import { chat } from "../helpers/server.ts";

const dir = mkdtempSync(join(tmpdir(), "tito-records-cut-journal-"));
const FILE_BYTES = 24 * 1024 * 1024;
let listener: Server;
let url = "";
let respond: (socket: Socket) => void = (socket) => socket.destroy();

test.before(async () => {
  listener = createServer((socket) => {
    adoptSocket(socket);
    respond(socket);
  });
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
});

test.after(async () => {
  await new Promise<void>((resolve) => listener.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

/** A file of JSON string bytes: the body `{"records":["…"]}` spans it. */
function segmentFile(name: string): string {
  const path = join(dir, name);
  writeFileSync(path, Buffer.alloc(FILE_BYTES, "a"));
  return path;
}

/** A records-like stream over `path` (or a range of a directory, which no read can take). */
async function streamOver(path: string, length = FILE_BYTES): Promise<RecordStream> {
  const fh = await open(path, "r");
  const parts: BodyPart[] = [
    Buffer.from('{"records":["'),
    { segment: { path, fh }, position: 0, length },
    Buffer.from('"]}'),
  ];
  return new RecordStream(parts, () => void fh.close().catch(() => {}));
}

/** Writes `stream` as the response to a GET, pausing the client after its first bytes for `midway`. */
async function serve(stream: RecordStream, midway?: () => Promise<void> | void): Promise<RecordsGet> {
  let written!: Promise<boolean>;
  respond = (socket) => {
    written = writeRawResponse(socket, 200, [{ "content-type": "application/json" }], stream);
  };
  const got = await recordsGet(url, "/", { midway: async () => await midway?.() });
  assert.is(await written, got.outcome === "complete", "the writer says what the client saw");
  return got;
}

test("a whole stream: complete, its trailers checked", async () => {
  const got = await serve(await streamOver(segmentFile("whole")));
  assert.is(got.outcome, "complete", got.why);
  assert.is(got.res!.trailers["x-tito-body-bytes"], String(FILE_BYTES + 16));
});

test("a stream stopped early by someone else (its return()): an error, never the last chunk", async () => {
  const stream = await streamOver(segmentFile("stopped"));
  const got = await serve(stream, () => void stream.return());
  assert.is(got.outcome, "errored", `${got.outcome}: ${got.why}`);
});

test("the file truncated under the stream: an error", async () => {
  const path = segmentFile("truncated");
  const got = await serve(await streamOver(path), () => truncateSync(path, FILE_BYTES / 3));
  assert.is(got.outcome, "errored", `${got.outcome}: ${got.why}`);
});

test("a read that fails midway (EISDIR, as a disk error would): an error", async () => {
  const path = join(dir, "unreadable");
  mkdirSync(path);
  const fh = await open(path, "r");
  const stream = new RecordStream(
    [Buffer.alloc(8 * 1024 * 1024, "b"), { segment: { path, fh }, position: 0, length: 1024 }],
    () => void fh.close().catch(() => {}),
  );
  const got = await serve(stream);
  assert.is(got.outcome, "errored", `${got.outcome}: ${got.why}`);
});

// Through a real server: the session's journal segment cut under its GET.
let engine: SimEngine | undefined;
let server: SessionServer | undefined;

async function sessionServer(name: string): Promise<{ id: string; data: string }> {
  await server?.shutdown();
  engine ??= await startSimEngine({ routedExpertsBytes: 3 * 1024 * 1024 });
  const data = join(dir, name);
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: 1,
    port: 0,
    logLevel: "silent",
    routingReplay: true,
    dataDir: data,
  });
  const id = (await server.createSession()).sessionId;
  const messages: unknown[] = [{ role: "user", content: "Hello" }];
  for (let turn = 0; turn < 4; turn++) {
    const { res, message } = await chat(server.url, id, messages);
    assert.is(res.status, 200, res.text);
    messages.push(message, { role: "user", content: `more ${turn}` });
  }
  return { id, data };
}

/** The largest file under `root`: the segment that holds the session's records. */
function largest(root: string): string {
  let best = { path: "", size: -1 };
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (statSync(path).size > best.size) best = { path, size: statSync(path).size };
    }
  };
  walk(root);
  return best.path;
}

for (const version of ["1.1", "1.0"] as const)
  test(`the journal segment truncated under a streaming GET (HTTP/${version}): an error`, async () => {
    const { id, data } = await sessionServer(`server-${version}`);
    const segment = largest(data);
    const got = await recordsGet(server!.url, `/sessions/${id}`, {
      version,
      boundMs: 20_000,
      midway: () => Promise.resolve(truncateSync(segment, Math.floor(statSync(segment).size / 4))),
    });
    assert.is(got.outcome, "errored", `${got.outcome}: ${got.why} after ${got.bytes} bytes`);
  });

test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

test.run();
