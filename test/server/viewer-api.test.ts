// What the viewer (docs/viewer.md) reads besides the routes it always had, over a real tree:
// GET /sessions?detail=1 (summaries, with the weight versions and commit time rebuilt from
// the journal after a worker restart) and its prefix filter, the samples route's
// ?token_text=1, drift entries that say where they are in the tokens, and GET /ui serving the
// page's files, open without the admin token while every other route still needs it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer, type SupervisionEvent } from "../../index.ts";
import { buildRouterApp } from "../../server/router/router-app.ts";
import { ShardLinks } from "../../server/router/shard-links.ts";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { waitForEvent } from "../helpers/events.ts";
import { call, chat, newSession, toolLoop, WEATHER_TOOL } from "../helpers/server.ts";

const WORKERS = 2;
const dataDir = mkdtempSync(join(tmpdir(), "tito-viewer-api-"));
let engine: SimEngine;
let server: SessionServer;
let base: string;
const events: SupervisionEvent[] = [];

interface Summary {
  session_id: string;
  family: string;
  turns: number;
  tokens: number;
  last_activity: number | null;
  weight_versions: (string | null)[];
  drift: string[] | null;
}

test.before(async () => {
  engine = await startSimEngine();
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: WORKERS,
    dataDir,
    restartBackoffMs: 50,
    maxRestarts: 10,
    logLevel: "warn",
    onEvent: (e) => events.push(e),
  });
  base = server.url;
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const listed = async (query: string) => {
  const res = await call<{ sessions: Summary[]; next: string | null }>(base, "GET", `/sessions?${query}`);
  assert.is(res.status, 200, res.text);
  return res.json;
};

test("GET /sessions?detail=1: each session's facts, kept across a worker restart (journal replay)", async () => {
  await call(base, "POST", "/admin/resume", { weight_version: "v1" });
  const id = await newSession(base);
  const { messages } = await toolLoop(base, id);
  await call(base, "POST", "/admin/resume", { weight_version: "v2" });
  messages.push({ role: "user", content: "And in Rome?" });
  const before = Date.now() / 1000;
  const third = await chat(base, id, messages, { tools: [WEATHER_TOOL] });
  assert.is(third.res.status, 200);
  const empty = await newSession(base);
  const sample = await call<{ tokens: number[] }>(base, "POST", `/sessions/${id}/samples`, {});

  const check = async () => {
    const page = await listed("detail=1&limit=1000");
    const mine = page.sessions.find((s) => s.session_id === id)!;
    assert.ok(mine, "the session is listed");
    assert.is(mine.family, "qwen3");
    assert.is(mine.turns, 3);
    assert.is(mine.tokens, sample.json.tokens.length);
    assert.equal(mine.weight_versions, ["v1", "v2"]);
    // The third turn's commit time (records keep milliseconds).
    assert.ok(
      mine.last_activity! >= before - 0.001 && mine.last_activity! <= Date.now() / 1000,
      String(mine.last_activity),
    );
    assert.ok(Array.isArray(mine.drift), "the drift flags were computed");
    const none = page.sessions.find((s) => s.session_id === empty)!;
    assert.equal(none, {
      session_id: empty,
      family: "qwen3",
      turns: 0,
      tokens: 0,
      last_activity: null,
      weight_versions: [],
      drift: [],
    });
    return mine;
  };
  const live = await check();

  // A restarted worker rebuilds its sessions from the journal: the same facts come back.
  const shard = shardOf(id, WORKERS);
  process.kill(server.tree().shards[shard]!.pid!, "SIGKILL");
  await waitForEvent(
    server,
    () => events,
    (e) => e.actor === `shard-${shard}` && e.kind === "restarted",
  );
  assert.equal(await check(), live);
});

test("GET /sessions: prefix= filters ids; ids only without detail; detail must be 0 or 1", async () => {
  const ids = [await newSession(base), await newSession(base), await newSession(base)];
  const prefix = ids[0]!.slice(0, 3);
  const page = await listed(`prefix=${prefix}&limit=1000`);
  assert.ok((page.sessions as unknown as string[]).includes(ids[0]!));
  for (const s of page.sessions as unknown as string[]) assert.ok(s.startsWith(prefix), s);
  const all = (await listed("limit=1000")).sessions as unknown as string[];
  assert.equal(
    page.sessions,
    all.filter((s) => s.startsWith(prefix)),
  );
  // Paged with details: the cursor is an id, and the pages together are the whole listing.
  const seen: string[] = [];
  let after = "";
  for (;;) {
    const p = await listed(`detail=1&limit=2&after=${after}`);
    seen.push(...p.sessions.map((s) => s.session_id));
    if (p.next === null) break;
    after = p.next;
  }
  assert.equal(seen, all);
  const bad = await call(base, "GET", "/sessions?detail=yes");
  assert.is(bad.status, 400);
  assert.equal(bad.json, { error: 'detail must be 0 or 1, got "yes"', code: "TITO_ERR_INVALID_LIST_REQUEST" });
});

test("samples ?token_text=1: each token's text, and the drift report's token spans", async () => {
  const id = await newSession(base);
  await toolLoop(base, id);
  const res = await call<{ tokens: number[]; token_texts: string[] }>(
    base,
    "POST",
    `/sessions/${id}/samples?token_text=1`,
    {},
  );
  assert.is(res.status, 200, res.text);
  const { tokens, token_texts: texts } = res.json;
  assert.is(texts.length, tokens.length);
  const joined = texts.join("");
  for (const part of ["<|im_start|>system\nYou are helpful.", "What is the weather in Paris?", '{"temp_c": 21}'])
    assert.ok(joined.includes(part), `the texts hold ${JSON.stringify(part)}`);
  const plain = await call<Record<string, unknown>>(base, "POST", `/sessions/${id}/samples`, {});
  assert.not.ok("token_texts" in plain.json, "without token_text the sample is as before");

  const refusals: [string, string][] = [
    ["?token_text=yes", 'token_text must be 1 or 0, got "yes"'],
    ["?token_text=1&format=safetensors", "token_text=1 needs the JSON format (the safetensors file has no texts)"],
  ];
  for (const [query, message] of refusals) {
    const r = await call(base, "POST", `/sessions/${id}/samples${query}`, {});
    assert.is(r.status, 400);
    assert.equal(r.json, { error: message, code: "TITO_ERR_INVALID_SAMPLE_REQUEST" });
  }

  // A tool loop on Qwen3 drifts where the template re-renders the assistant turns (docs/http.md, Metadata).
  type Drift = { type: string; segment_index: number; token_start?: number; token_end?: number };
  const records = await call<{ metadata: { tito_session_mismatch: Drift[] } }>(base, "GET", `/sessions/${id}`);
  const drift = records.json.metadata.tito_session_mismatch;
  assert.ok(drift.length > 0, "the tool loop has drift entries to point at");
  for (const m of drift) {
    assert.ok(m.segment_index >= 0, JSON.stringify(m));
    if (m.type === "special_token_count") continue; // located by segment and message, not by span
    assert.ok(m.token_start! < m.token_end! && m.token_end! <= tokens.length, JSON.stringify(m));
    if (m.type === "assistant_text") assert.ok(texts.slice(m.token_start, m.token_end).join("").length > 0);
  }
});

test("GET /ui: the page and its modules, open without the admin token; the rest still needs it", async () => {
  const app = buildRouterApp({
    links: new ShardLinks(1, 0),
    status: { instanceId: "0".repeat(32), tree: null, events: [] },
    bodyLimit: 1024,
    logger: false,
    authToken: "the-admin-token",
  });
  try {
    const page = await app.inject({ method: "GET", url: "/ui" });
    assert.is(page.statusCode, 200);
    assert.is(page.headers["content-type"], "text/html; charset=utf-8");
    assert.ok(page.body.includes('src="ui/app.js"'));
    for (const [url, type] of [
      ["/ui/app.js", "text/javascript; charset=utf-8"],
      ["/ui/token-strip.js", "text/javascript; charset=utf-8"],
      ["/ui/viewer.css", "text/css; charset=utf-8"],
    ]) {
      const res = await app.inject({ method: "GET", url: url! });
      assert.is(res.statusCode, 200, `${url}: ${res.body}`);
      assert.is(res.headers["content-type"], type);
    }
    const missing = await app.inject({
      method: "GET",
      url: "/ui/secret.js",
      headers: { authorization: "Bearer the-admin-token" },
    });
    assert.is(missing.statusCode, 404);
    assert.equal(missing.json(), {
      error: "viewer file not found: /ui/secret.js (is the package built? npm run build)",
      code: "TITO_ERR_VIEWER_FILE_NOT_FOUND",
    });
    // Only the files themselves are open: a query, another file or another route needs the token.
    for (const url of ["/ui?x=1", "/ui/secret.js", "/ui/app.js.map", "/sessions", "/supervision"])
      assert.is((await app.inject({ method: "GET", url })).statusCode, 401, url);
    assert.is((await app.inject({ method: "POST", url: "/ui" })).statusCode, 401);
  } finally {
    await app.close();
  }
});

test.run();
