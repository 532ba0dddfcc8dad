// What every engine request of a session carries besides its turn (sessions/upstream-keys.ts),
// seen by a recording proxy in front of the simulated engine, on each engine API, streamed
// and not: the cache salt per --cache-salt mode (SGLang's `extra_key` on /generate,
// `cache_salt` on its chat route and on vLLM's /v1/completions; none with `off` or while no
// weight version is known, the request then byte for byte what `off` sends), the engine's
// cache hits that follow from it, the same `session` salt from a core that replayed the
// journal, and the routing key in the --engine-session-headers, on turns and on the proxy route.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { EngineApi } from "../../engine/index.ts";
import { JournalRecordStore, type SessionCore } from "../../sessions/index.ts";
import type { CacheSaltMode } from "../../sessions/upstream-keys.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { coreFor, responseJson, responseText } from "../helpers/core.ts";
import { startRecorder, type Upstream } from "../helpers/recording-proxy.ts";
import { qwen3 } from "./fixtures.ts";

const APIS: EngineApi[] = ["sglang-chat", "sglang-generate", "vllm-completions"];
const FIELD: Record<EngineApi, string> = {
  "sglang-chat": "cache_salt",
  "sglang-generate": "extra_key",
  "vllm-completions": "cache_salt",
};
const HEADERS = ["X-SMG-Routing-Key", "X-Session-ID"];

let engine: SimEngine;
let recorder: Server;
const upstream: Upstream[] = [];
let proxyUrl = "";
const cores: SessionCore[] = [];
const root = mkdtempSync(join(tmpdir(), "tito-upstream-keys-"));

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: qwen3(), prefixCache: true, promptTokensDetails: true });
  recorder = await startRecorder(engine.url, upstream);
  proxyUrl = `http://127.0.0.1:${(recorder.address() as { port: number }).port}`;
});
test.after(async () => {
  for (const c of cores) await c.close();
  await new Promise((resolve) => recorder.close(resolve));
  await engine.close();
  rmSync(root, { recursive: true, force: true });
});
test.before.each(() => {
  upstream.length = 0;
});

function core(api: EngineApi, cacheSalt?: CacheSaltMode, extra: Parameters<typeof coreFor>[0] | object = {}) {
  const c = coreFor({
    engineUrl: proxyUrl,
    engineApi: api,
    tokenizerFolder: qwen3(),
    allowedAppendRoles: ["tool", "user"],
    cacheSalt,
    sessionHeaders: HEADERS,
    ...extra,
  });
  cores.push(c);
  return c;
}

/** The assistant's text from a chat.completion, or from the content deltas of a stream's events. */
function contentOf(text: string, stream: boolean): string {
  if (!stream) return JSON.parse(text).choices[0].message.content;
  let content = "";
  for (const line of text.split("\n"))
    if (line.startsWith("data: {")) content += JSON.parse(line.slice(6)).choices?.[0]?.delta?.content ?? "";
  return content;
}

/** One turn of session `id` on `messages` under `weightVersion`; the assistant's reply is appended to `messages`. */
async function turn(c: SessionCore, id: string, messages: unknown[], weightVersion: string | null, stream = false) {
  const body = Buffer.from(JSON.stringify({ model: "m", messages, ...(stream ? { stream: true } : {}) }));
  const req = { method: "POST", path: "/v1/chat/completions", query: "", headers: {}, body };
  const res = await c.chat(id, req, undefined, { weightVersion });
  const text = await responseText(res);
  assert.is(res.status, 200, text);
  assert.ok(!stream || text.endsWith("data: [DONE]\n\n"), text.slice(-200));
  messages.push({ role: "assistant", content: contentOf(text, stream) });
}

/** Two turns (a question, then a follow-up) on a new session `id`, under the two versions; `stream` streams both. */
async function twoTurns(c: SessionCore, id: string, versions: [string | null, string | null], stream = false) {
  await c.create(id);
  const messages: unknown[] = [{ role: "user", content: `What is the weather in Paris? (${id})` }];
  await turn(c, id, messages, versions[0], stream);
  messages.push({ role: "user", content: "And tomorrow?" });
  await turn(c, id, messages, versions[1], stream);
  messages.push({ role: "user", content: "And the day after?" });
  return messages;
}

/** The engine's cached_tokens of each committed turn of the session (its records' /generate replies). */
async function cachedTokens(c: SessionCore, id: string): Promise<number[]> {
  const { records } = await responseJson(await c.get(id));
  return (records as Array<{ response: { meta_info: { cached_tokens: number } } }>).map(
    (r) => r.response.meta_info.cached_tokens,
  );
}

const bodies = () =>
  upstream.filter((u) => u.url !== "/v1/models").map((u) => JSON.parse(u.body) as Record<string, unknown>);

for (const api of APIS) {
  const field = FIELD[api];
  const other = field === "extra_key" ? "cache_salt" : "extra_key";

  test(`${api}: turn salts each request with its own version, session with the session's first`, async () => {
    await twoTurns(core(api, "turn"), `${api}-turn`, ["v1", "v2"]);
    assert.equal(
      bodies().map((b) => [b[field], b[other]]),
      [
        ["v1", undefined],
        ["v2", undefined],
      ],
    );
    upstream.length = 0;
    await twoTurns(core(api, "session"), `${api}-session`, ["v1", "v2"]);
    assert.equal(
      bodies().map((b) => b[field]),
      ["v1", "v1"],
    );
    upstream.length = 0;
    await twoTurns(core(api), `${api}-default`, ["v3", "v4"]);
    assert.equal(
      bodies().map((b) => b[field]),
      ["v3", "v3"],
      "session is the default",
    );
  });

  test(`${api}: off sends no salt; no version known sends none, the bytes off sends`, async () => {
    await twoTurns(core(api, "off"), `${api}-same`, ["v1", "v2"]);
    const off = upstream.filter((u) => u.url !== "/v1/models").map((u) => u.body);
    for (const b of bodies()) assert.not.ok(field in b || other in b, JSON.stringify(b).slice(0, 200));
    upstream.length = 0;
    // A new core: the same session id, the same conversation, no version set yet.
    await twoTurns(core(api, "session"), `${api}-same`, [null, null]);
    const none = upstream.filter((u) => u.url !== "/v1/models").map((u) => u.body);
    assert.equal(none, off);
  });

  test(`${api}: the routing key in every session header, streamed too; none with no headers`, async () => {
    await twoTurns(core(api, "session"), `${api}-plain`, ["v1", "v1"]);
    await twoTurns(core(api, "session"), `${api}-streamed`, ["v1", "v1"], true);
    const turns = upstream.filter((u) => u.url !== "/v1/models");
    assert.is(turns.length, 4);
    turns.forEach((u, i) => {
      const id = i < 2 ? `${api}-plain` : `${api}-streamed`;
      assert.is(u.headers["x-smg-routing-key"], id, u.url);
      assert.is(u.headers["x-session-id"], id, u.url);
    });
    assert.equal(
      turns.map((u) => JSON.parse(u.body).stream),
      // SGLang's chat route is asked without a stream (engine/sglang-chat.ts): the client's turn is streamed.
      api === "sglang-chat" ? [undefined, undefined, false, false] : [false, false, true, true],
    );
    upstream.length = 0;
    await twoTurns(core(api, "session", { sessionHeaders: [] }), `${api}-unrouted`, ["v1", "v1"]);
    for (const u of upstream) {
      assert.is(u.headers["x-smg-routing-key"], undefined);
      assert.is(u.headers["x-session-id"], undefined);
    }
  });
}
test("after a new version, `turn` misses the engine's cache and `session` hits it", async () => {
  await twoTurns(core("sglang-generate", "session"), "hits-session", ["hits-v1", "hits-v2"]);
  await twoTurns(core("sglang-generate", "turn"), "hits-turn", ["hits-v1", "hits-v2"]);
  assert.equal(
    bodies().map((b) => b.extra_key),
    ["hits-v1", "hits-v1", "hits-v1", "hits-v2"],
  );
  const session = await cachedTokens(cores.at(-2)!, "hits-session");
  const turned = await cachedTokens(cores.at(-1)!, "hits-turn");
  assert.is(session[0], 0, "a new prefix");
  assert.ok(session[1]! > 0, `the session's salt hits its first turn's prefix: ${session}`);
  assert.is(turned[0], 0);
  assert.is(turned[1], 0, "the new version's salt finds nothing cached");
});

test("`session`: a core that replayed the journal sends the same salt, and it hits", async () => {
  const dir = join(root, "journal");
  const open = async () => {
    const recordStore = await JournalRecordStore.open({ dir, fsync: "every" });
    const c = core("sglang-generate", "session", { recordStore });
    await c.recover();
    return c;
  };
  const first = await open();
  const messages = await twoTurns(first, "replayed", ["replay-v1", "replay-v2"]);
  await first.close();
  cores.splice(cores.indexOf(first), 1);
  const second = await open();
  await turn(second, "replayed", messages, "replay-v3");
  assert.equal(
    bodies().map((b) => b.extra_key),
    ["replay-v1", "replay-v1", "replay-v1"],
  );
  const hits = await cachedTokens(second, "replayed");
  assert.ok(hits[2]! > hits[1]!, `the replayed session's third turn hits more of its prefix: ${hits}`);
});

test("the proxy route carries the session's routing key too", async () => {
  const c = core("sglang-chat", "session");
  await c.create("proxied");
  const res = await c.proxy("proxied", {
    method: "GET",
    path: "/v1/models",
    query: "",
    headers: {},
    body: Buffer.alloc(0),
  });
  assert.is(res.status, 200);
  assert.is(upstream.length, 1);
  assert.is(upstream[0]!.url, "/v1/models");
  assert.is(upstream[0]!.headers["x-smg-routing-key"], "proxied");
  assert.is(upstream[0]!.headers["x-session-id"], "proxied");
});

test.run();
