// Engine misbehaviour and header forwarding. A tiny local HTTP server stands in for the
// GPU engine with canned replies (it replaces the engine, never our code).
import { coreFor } from "../helpers/core.ts";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { type CoreResponse, type SessionCore } from "../../sessions/index.ts";
import { qwen3 } from "../sessions/fixtures.ts";

const folder = qwen3();
interface Canned {
  status: number;
  headers?: Record<string, string>;
  body: string;
  /** Never answer (for the timeout). */
  hang?: boolean;
}
let canned: Canned = { status: 200, body: "{}" };
/** Called when the canned engine has received a whole request. */
let onArrival: (() => void) | undefined;
let seen: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[] = [];
let server: Server;
let core: SessionCore;
let authCore: SessionCore;
let slowCore: SessionCore;

const bodyJson = (r: CoreResponse) => JSON.parse((Array.isArray(r.body) ? Buffer.concat(r.body) : r.body).toString());
const chatReq = (headers: Record<string, string> = {}) => ({
  method: "POST",
  path: "/v1/chat/completions",
  query: "",
  headers: { "content-type": "application/json", ...headers },
  body: Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "hi" }] })),
});
const good = (meta: Record<string, unknown>, content: unknown = "Hello.") =>
  JSON.stringify({
    id: "r",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop", meta_info: meta }],
  });
const ids = folder.encode("Hello.");
const fullMeta = { output_token_logprobs: ids.map((id) => [-0.5, id]), completion_tokens: ids.length };

test.before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      // The context-length read (engine/context-length.ts) is not what these tests look at:
      // a 404 leaves the length unknown, and `seen` holds the turns' and proxy's requests.
      if (req.method === "GET" && req.url!.endsWith("/v1/models")) {
        res.writeHead(404).end();
        return;
      }
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString() });
      onArrival?.();
      if (canned.hang) return;
      res.writeHead(canned.status, { "content-type": "application/json", ...canned.headers });
      res.end(canned.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  core = coreFor({ engineUrl: url, tokenizerFolder: folder });
  authCore = coreFor({ engineUrl: `${url}/prefix/`, tokenizerFolder: folder, authToken: "secret" });
  slowCore = coreFor({ engineUrl: url, tokenizerFolder: folder, engineTimeoutMs: 150 });
});

test.after(async () => {
  await Promise.all([core.close(), authCore.close(), slowCore.close()]);
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

async function turn(c: SessionCore = core) {
  const id = bodyJson(await c.create()).session_id;
  const r = await c.chat(id, chatReq());
  const records = bodyJson(await c.get(id)).records;
  return { r, records };
}

test("a valid canned reply is recorded (control for the cases below)", async () => {
  canned = { status: 200, body: good(fullMeta) };
  const { r, records } = await turn();
  assert.is(r.status, 200);
  assert.is(records.length, 1);
});

test("content null -> 502 'assistant message content is None', unrecorded", async () => {
  canned = { status: 200, body: good(fullMeta, null) };
  const { r, records } = await turn();
  assert.is(r.status, 502);
  assert.match(bodyJson(r).error, /^assistant message content is None/);
  assert.is(records.length, 0);
});

test("missing meta_info, length mismatch, non-JSON -> 502", async () => {
  for (const [body, pattern] of [
    [
      JSON.stringify({ choices: [{ message: { role: "assistant", content: "x" } }] }),
      /meta_info\.output_token_logprobs/,
    ],
    [good({ ...fullMeta, completion_tokens: ids.length + 1 }), /length mismatch/],
    ["<html>oops</html>", /not valid JSON/],
  ] as const) {
    canned = { status: 200, body };
    const { r, records } = await turn();
    assert.is(r.status, 502, body);
    assert.match(bodyJson(r).error, pattern);
    assert.is(records.length, 0);
  }
});

test("an engine non-200 passes through unrecorded, body and status as sent", async () => {
  canned = { status: 503, headers: { "x-engine": "busy" }, body: '{"detail":"overloaded"}' };
  const { r, records } = await turn();
  assert.is(r.status, 503);
  assert.equal(bodyJson(r), { detail: "overloaded" });
  assert.is(r.headers["x-engine"], "busy");
  assert.is(records.length, 0);
});

test("a second turn through a canned engine extends the first turn's ids", async () => {
  canned = { status: 200, body: good(fullMeta) };
  const id = bodyJson(await core.create()).session_id;
  assert.is((await core.chat(id, chatReq())).status, 200);
  // An appended tool message after the reply extends the trajectory: a valid turn 2.
  const m = [
    { role: "user", content: "hi" },
    { role: "assistant", content: "Hello." },
    { role: "tool", content: "r" },
  ];
  const r2 = await core.chat(id, { ...chatReq(), body: Buffer.from(JSON.stringify({ messages: m })) });
  assert.is(r2.status, 200);
  const got = bodyJson(await core.get(id));
  assert.is(got.records.length, 2);
  const turn2 = got.records[1].request.input_ids as number[];
  const turn1 = got.records[0].request.input_ids as number[];
  assert.equal(turn2.slice(0, turn1.length), turn1);
});

test("request headers: hop-by-hop and framing dropped, authorization dropped under auth, the rest forwarded", async () => {
  canned = {
    status: 200,
    headers: { "x-reply": "1", connection: "keep-alive", "keep-alive": "timeout=5" },
    body: good(fullMeta),
  };
  seen = [];
  const headers = {
    authorization: "Bearer secret",
    "x-trace": "abc",
    "x-dropme": "1",
    connection: "x-dropme",
    "keep-alive": "timeout=1",
    "proxy-authorization": "p",
    te: "trailers",
    "transfer-encoding": "chunked",
    "content-length": "999",
    host: "client.example",
    upgrade: "h2c",
    trailer: "x",
    "accept-encoding": "gzip",
  };
  const id = bodyJson(await core.create()).session_id;
  const r = await core.chat(id, chatReq(headers));
  assert.is(r.status, 200);
  const up = seen[0]!.headers;
  assert.is(up["x-trace"], "abc");
  assert.is(up.authorization, "Bearer secret", "without --auth-token the client's authorization goes upstream");
  for (const h of ["x-dropme", "proxy-authorization", "te", "upgrade", "trailer", "keep-alive", "accept-encoding"])
    assert.is(up[h], undefined, h);
  assert.is(up.host, new URL(`http://${up.host}`).host);
  assert.is.not(up.host, "client.example");
  assert.is(Number(up["content-length"]), Buffer.byteLength(seen[0]!.body), "framing is ours, not the client's");
  assert.is(r.headers["x-reply"], "1");
  for (const h of ["connection", "keep-alive", "content-length", "transfer-encoding"])
    assert.is(r.headers[h], undefined, h);

  seen = [];
  const aid = bodyJson(await authCore.create()).session_id;
  await authCore.chat(aid, chatReq(headers));
  assert.is(seen[0]!.headers.authorization, undefined, "the server's token never reaches the engine");
  assert.is(seen[0]!.url, "/prefix/v1/chat/completions", "the engine URL's path is the root");
  seen = [];
  await authCore.proxy("any", { method: "POST", path: "/v1/x", query: "a=1&b=2", headers, body: Buffer.from("raw") });
  assert.equal(
    [seen[0]!.method, seen[0]!.url, seen[0]!.body, seen[0]!.headers.authorization],
    ["POST", "/prefix/v1/x?a=1&b=2", "raw", undefined],
  );
});

test("an engine that does not answer in time is a 502 naming the timeout", async () => {
  canned = { status: 200, body: "", hang: true };
  const { r, records } = await turn(slowCore);
  assert.is(r.status, 502);
  assert.match(bodyJson(r).error, /engine timeout: .*150 ms/);
  assert.is(records.length, 0);
});

test("an aborted chat returns an abort error and records nothing", async () => {
  canned = { status: 200, body: "", hang: true };
  const id = bodyJson(await core.create()).session_id;
  const controller = new AbortController();
  const arrived = new Promise<void>((r) => (onArrival = r));
  const pending = core.chat(id, chatReq(), controller.signal);
  await arrived;
  onArrival = undefined;
  controller.abort();
  const r = await pending;
  assert.is(r.status, 499);
  assert.is(bodyJson(await core.get(id)).records.length, 0);
});

test.run();
