// Every error response of the HTTP contract carries its code (docs/http.md, docs/errors.md):
// the error cases of docs/http.md's tables, walked through one real tree (router + worker
// processes, the simulated engine), each answered `{"error": message, "code": code}` with
// the status and headers of the code's class, or on the Anthropic Messages route
// Anthropic's shape with the code inside. Each router error class is reached here, or named
// with the reason a test cannot reach it from outside; so is each 4xx of the session layer.
import { readFileSync } from "node:fs";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { call, startGatedEngine, type GatedEngine } from "../helpers/server.ts";
import type { SessionCreatedBody as Created } from "../helpers/bodies.ts";

type SessionCreatedBody = Created & { session_token: string };

const ADMIN = "admin-token-for-error-codes";
const admin = { authorization: `Bearer ${ADMIN}` };
const BODY_LIMIT = 8 * 1024;
const HOLD_TIMEOUT_MS = 100;

let engine: GatedEngine;
let server: SessionServer;
let base: string;

test.before(async () => {
  engine = await startGatedEngine();
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: 1,
    bodyLimit: BODY_LIMIT,
    authToken: ADMIN,
    holdTimeoutMs: HOLD_TIMEOUT_MS,
    shardWaitMs: 200,
    maxRestarts: 5,
    logLevel: "silent",
  });
  base = server.url;
});

test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

/** The codes each case below answered, for the coverage checks at the end. */
const seen = new Set<string>();

interface Case {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Sends `c` and checks the body is exactly `{error, code}` with `status` and `code`; returns the message. */
async function expectError(c: Case, status: number, code: string): Promise<string> {
  const res = await call<{ error: string; code: string }>(base, c.method, c.path, c.body, c.headers ?? admin);
  const what = `${c.method} ${c.path.slice(0, 80)}`;
  assert.is(res.status, status, `${what}: status (${res.text.slice(0, 200)})`);
  assert.equal(
    Object.keys(res.json ?? {}).sort(),
    ["code", "error"],
    `${what}: the body is {error, code}: ${res.text}`,
  );
  assert.is(res.json.code, code, `${what}: code`);
  assert.type(res.json.error, "string");
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/, `${what}: JSON`);
  seen.add(code);
  return res.json.error;
}

const chatPath = (id: string) => `/sessions/${id}/v1/chat/completions`;
const turn = (messages: unknown[], extra: Record<string, unknown> = {}) => ({ model: "m", messages, ...extra });

test("the router's own errors carry their codes", async () => {
  await expectError({ method: "GET", path: "/sessions", headers: {} }, 401, "TITO_ERR_UNAUTHORIZED");
  const created = await call<SessionCreatedBody>(base, "POST", "/sessions", undefined, admin);
  const agent = { authorization: `Bearer ${created.json.session_token}` };
  await expectError(
    { method: "DELETE", path: `/sessions/${created.json.session_id}`, headers: agent },
    403,
    "TITO_ERR_FORBIDDEN",
  );
  assert.match(
    await expectError({ method: "PATCH", path: "/sessions" }, 404, "TITO_ERR_ROUTE_NOT_FOUND"),
    /route not found/,
  );
  assert.match(
    await expectError({ method: "GET", path: "/ui/missing.js" }, 404, "TITO_ERR_VIEWER_FILE_NOT_FOUND"),
    /viewer file not found: \/ui\/missing\.js/,
  );
  const big = { model: "m", messages: [{ role: "user", content: "x".repeat(BODY_LIMIT) }] };
  await expectError(
    { method: "POST", path: chatPath(created.json.session_id), body: big },
    413,
    "TITO_ERR_BODY_TOO_LARGE",
  );
  await expectError({ method: "GET", path: "/supervision/events?since=x" }, 400, "TITO_ERR_BAD_REQUEST");
  await expectError({ method: "GET", path: `/sessions/${"a".repeat(300)}` }, 414, "TITO_ERR_URI_TOO_LONG");
  await expectError({ method: "PUT", path: `/sessions/${"a".repeat(300)}` }, 400, "TITO_ERR_INVALID_SESSION_ID");
  await expectError({ method: "GET", path: "/sessions?limit=0" }, 400, "TITO_ERR_INVALID_LIST_REQUEST");
  await expectError({ method: "POST", path: "/admin/pause", body: "{" }, 400, "TITO_ERR_INVALID_ADMIN_REQUEST");
  await expectError(
    { method: "POST", path: "/admin/resume", body: { weight_version: "" } },
    400,
    "TITO_ERR_INVALID_ADMIN_REQUEST",
  );
});

test("a turn held past --hold-timeout-ms: 503 with its code and Retry-After", async () => {
  const created = await call<SessionCreatedBody>(base, "POST", "/sessions", undefined, admin);
  const paused = await call(base, "POST", "/admin/pause", {}, admin);
  assert.is(paused.status, 200);
  try {
    const res = await call<{ error: string; code: string }>(
      base,
      "POST",
      chatPath(created.json.session_id),
      turn([{ role: "user", content: "hi" }]),
      admin,
    );
    assert.is(res.status, 503);
    assert.equal(res.json.code, "TITO_ERR_HOLD_TIMEOUT");
    assert.is(res.headers.get("retry-after"), "1");
    seen.add(res.json.code);
  } finally {
    assert.is((await call(base, "POST", "/admin/resume", { weight_version: "v1" }, admin)).status, 200);
  }
});

test("a turn a pause aborts: 503 with its code and Retry-After, from the worker", async () => {
  const created = await call<SessionCreatedBody>(base, "POST", "/sessions", undefined, admin);
  const gate = engine.hold();
  const pending = call<{ error: string; code: string }>(
    base,
    "POST",
    chatPath(created.json.session_id),
    turn([{ role: "user", content: "hi" }]),
    admin,
  );
  await gate.arrived;
  const paused = await call(base, "POST", "/admin/pause", { in_flight: "abort" }, admin);
  gate.release();
  const res = await pending;
  assert.is(paused.status, 200);
  assert.is(res.status, 503);
  assert.is(res.json.code, "TITO_ERR_TURN_ABORTED");
  assert.is(res.headers.get("retry-after"), "1");
  seen.add(res.json.code);
  assert.is((await call(base, "POST", "/admin/resume", { weight_version: "v2" }, admin)).status, 200);
});

test("a fork's errors carry their codes (POST /sessions/{id}/fork)", async () => {
  const created = await call<SessionCreatedBody>(base, "POST", "/sessions", undefined, admin);
  const fork = (body: unknown): Case => ({ method: "POST", path: `/sessions/${created.json.session_id}/fork`, body });
  await expectError(fork({ at: -1 }), 400, "TITO_ERR_INVALID_FORK_REQUEST");
  await expectError(fork("{not json"), 400, "TITO_ERR_INVALID_FORK_REQUEST");
  await expectError(fork({ at: 0 }), 409, "TITO_ERR_FORK_TURN");
  await expectError(
    { method: "POST", path: "/sessions/nope/fork", body: { at: 0 } },
    404,
    "TITO_ERR_SESSION_NOT_FOUND",
  );
});

test("the worker's errors of the chat, session, samples and proxy routes carry their codes", async () => {
  const created = await call<SessionCreatedBody>(base, "POST", "/sessions", undefined, admin);
  const id = created.json.session_id;
  const post = (body: unknown): Case => ({ method: "POST", path: chatPath(id), body });
  await expectError(post("{not json"), 400, "TITO_ERR_INVALID_JSON");
  const tight = await call<SessionCreatedBody>(base, "POST", "/sessions", { max_total_tokens: 1 }, admin);
  const overBudget = turn([{ role: "user", content: "more than one token" }]);
  await expectError(
    { method: "POST", path: chatPath(tight.json.session_id), body: overBudget },
    400,
    "TITO_ERR_BUDGET",
  );
  const done = await call<SessionCreatedBody>(base, "POST", "/sessions", undefined, admin);
  assert.is((await call(base, "POST", `/sessions/${done.json.session_id}/abort`, undefined, admin)).status, 200);
  const finished: Case = { method: "POST", path: chatPath(done.json.session_id), body: overBudget };
  await expectError(finished, 409, "TITO_ERR_SESSION_FINISHED");
  await expectError(post("[1]"), 400, "TITO_ERR_INVALID_CHAT_REQUEST");
  await expectError(post({ messages: [] }), 400, "TITO_ERR_INVALID_CHAT_REQUEST");
  await expectError(post(turn([{ content: "no role" }])), 400, "TITO_ERR_INVALID_CHAT_REQUEST");
  await expectError(post(turn([{ role: "user", content: "hi" }], { tools: {} })), 400, "TITO_ERR_INVALID_CHAT_REQUEST");
  const image = [{ type: "image_url", image_url: { url: "data:," } }];
  await expectError(post(turn([{ role: "user", content: image }])), 400, "TITO_ERR_INVALID_CHAT_REQUEST");
  await expectError(
    post(turn([{ role: "user", content: "hi" }], { chat_template_kwargs: { clear_thinking: true } })),
    400,
    "TITO_ERR_PINNED_KWARG",
  );
  // A turn that works, then appends and rollbacks the session refuses.
  const ok = await call<{ choices: { message: unknown }[] }>(
    base,
    "POST",
    chatPath(id),
    turn([{ role: "user", content: "hi" }]),
    admin,
  );
  assert.is(ok.status, 200, ok.text);
  const history: unknown[] = [{ role: "user", content: "hi" }, ok.json.choices[0]!.message];
  await expectError(post(turn([...history, { role: "robot", content: "x" }])), 400, "TITO_ERR_INVALID_CHAT_REQUEST");
  await expectError(post(turn([...history, { role: "developer", content: "x" }])), 400, "TITO_ERR_APPEND_ROLE");
  // Two committed turns: a request that diverges before both would discard two.
  history.push({ role: "user", content: "again" });
  const second = await call<{ choices: { message: unknown }[] }>(base, "POST", chatPath(id), turn(history), admin);
  assert.is(second.status, 200, second.text);
  history.push(second.json.choices[0]!.message);
  await expectError(post(turn([{ role: "system", content: "other" }, ...history])), 400, "TITO_ERR_ROLLBACK");
  const messages = { model: "m", max_tokens: 5, messages: [{ role: "user", content: "hi" }] };
  const mix = await call<{ type: string; error: { type: string; code: string } }>(
    base,
    "POST",
    `/sessions/${id}/v1/messages`,
    messages,
    admin,
  );
  assert.is(mix.status, 400);
  assert.equal(
    [mix.json.type, mix.json.error.type, mix.json.error.code],
    ["error", "invalid_request_error", "TITO_ERR_CLIENT_API_MIX"],
  );
  seen.add(mix.json.error.code);

  const missing = "f".repeat(32);
  for (const c of [
    { method: "GET", path: `/sessions/${missing}` },
    { method: "DELETE", path: `/sessions/${missing}` },
    { method: "POST", path: `/sessions/${missing}/samples` },
    { method: "POST", path: chatPath(missing), body: turn([{ role: "user", content: "hi" }]) },
  ])
    await expectError(c, 404, "TITO_ERR_SESSION_NOT_FOUND");
  await expectError({ method: "PUT", path: "/sessions/bad%20id" }, 400, "TITO_ERR_INVALID_SESSION_ID");
  await expectError({ method: "PUT", path: `/sessions/${id}` }, 409, "TITO_ERR_SESSION_EXISTS");
  await expectError({ method: "POST", path: "/sessions", body: { max_turns: -1 } }, 400, "TITO_ERR_INVALID_BUDGET");
  await expectError(
    { method: "POST", path: `/sessions/${id}/samples`, body: { nope: 1 } },
    400,
    "TITO_ERR_INVALID_SAMPLE_REQUEST",
  );
  await expectError(
    { method: "POST", path: `/sessions/${id}/samples?format=xml` },
    400,
    "TITO_ERR_INVALID_SAMPLE_REQUEST",
  );
  await expectError({ method: "GET", path: `/sessions/${id}/v1/%252e%252e/x` }, 400, "TITO_ERR_PROXY_PATH");
  await expectError(
    { method: "POST", path: "/sessions", body: { trajectory: "forest" } },
    400,
    "TITO_ERR_INVALID_TRAJECTORY",
  );
  // A tree-mode node cut by length cannot be extended (docs/trajectories.md).
  const tree = await call<SessionCreatedBody>(base, "POST", "/sessions", { trajectory: "tree" }, admin);
  const cutTurn = turn([{ role: "user", content: "hi" }], { max_tokens: 1 });
  const cut = await call<{ choices: { message: unknown }[] }>(
    base,
    "POST",
    chatPath(tree.json.session_id),
    cutTurn,
    admin,
  );
  assert.is(cut.status, 200, cut.text);
  const extend = turn([{ role: "user", content: "hi" }, cut.json.choices[0]!.message, { role: "user", content: "on" }]);
  await expectError({ method: "POST", path: chatPath(tree.json.session_id), body: extend }, 409, "TITO_ERR_NODE_CUT");
  // A tree-mode session is not forked by turn index (its records are nodes, not one path),
  // nor at a node it does not have.
  await expectError(
    { method: "POST", path: `/sessions/${tree.json.session_id}/fork`, body: { at: 0 } },
    409,
    "TITO_ERR_FORK_TREE",
  );
  await expectError(
    { method: "POST", path: `/sessions/${tree.json.session_id}/fork`, body: { at: "n9" } },
    409,
    "TITO_ERR_FORK_NODE",
  );
});

test("the Anthropic Messages route: Anthropic's error shape, the code inside", async () => {
  const created = await call<SessionCreatedBody>(base, "POST", "/sessions", undefined, admin);
  const path = `/sessions/${created.json.session_id}/v1/messages`;
  const res = await call<{ type: string; error: { type: string; message: string; code: string } }>(
    base,
    "POST",
    path,
    { model: "m", max_tokens: 5 },
    admin,
  );
  assert.is(res.status, 400);
  assert.equal(
    [res.json.type, res.json.error.type, res.json.error.code],
    ["error", "invalid_request_error", "TITO_ERR_INVALID_MESSAGES_REQUEST"],
  );
  seen.add(res.json.error.code);
  // The router's own refusals there too: a body too large.
  const big = await call<{ type: string; error: { type: string; code: string } }>(
    base,
    "POST",
    path,
    { model: "m", max_tokens: 5, messages: [{ role: "user", content: "x".repeat(BODY_LIMIT) }] },
    admin,
  );
  assert.is(big.status, 413);
  assert.equal(
    [big.json.type, big.json.error.type, big.json.error.code],
    ["error", "request_too_large", "TITO_ERR_BODY_TOO_LARGE"],
  );
});

test("the engine gone: a chat turn and a proxied request are 502 with the engine's code", async () => {
  const created = await call<SessionCreatedBody>(base, "POST", "/sessions", undefined, admin);
  await engine.close();
  await expectError(
    { method: "POST", path: chatPath(created.json.session_id), body: turn([{ role: "user", content: "hi" }]) },
    502,
    "TITO_ERR_ENGINE_UNREACHABLE",
  );
  await expectError(
    { method: "GET", path: `/sessions/${created.json.session_id}/v1/models` },
    502,
    "TITO_ERR_ENGINE_UNREACHABLE",
  );
});

test("a worker gone: 503 with its code, for a session route and the listing", async () => {
  const pid = server.tree().shards[0]!.pid!;
  process.kill(pid, "SIGKILL");
  await expectError({ method: "DELETE", path: `/sessions/${"e".repeat(32)}` }, 503, "TITO_ERR_WORKER_UNAVAILABLE");
  assert.match(
    await expectError({ method: "GET", path: "/sessions" }, 503, "TITO_ERR_WORKER_UNAVAILABLE"),
    /listing would be incomplete/,
  );
});

/**
 * Codes no test can reach from outside the tree: a bug's 500s and 502s, a race at start,
 * and failures of the server's own machinery; each is written by the same handler as the
 * codes above (router: server/router/error-reply.ts; worker: sessions/session-core.ts).
 */
const UNREACHABLE: Record<string, string> = {
  TITO_ERR_WORKER_FAILED: "a worker that throws an uncoded error: a bug",
  TITO_ERR_ROUTER_INTERNAL: "a bug in the router",
  TITO_ERR_UNHEALTHY: "a worker failing its health check while the tree runs: test/server/supervision.test.ts",
  TITO_ERR_TREE_UNKNOWN: "the moment between the router listening and the host sending the tree",
  TITO_ERR_LISTEN: "a router that cannot listen fails the start, no client sees it: test/server/cli.test.ts",
  TITO_ERR_OVERLOADED: "only with --max-queued-turns, which this tree does not set: test/server/overload.test.ts",
};

test("every code the router defines was answered above, or is named as unreachable", () => {
  const source = readFileSync(new URL("../../server/router/errors.ts", import.meta.url), "utf8");
  const codes = [...new Set([...source.matchAll(/"(TITO_ERR_[A-Z_]+)"/g)].map((m) => m[1]!))];
  assert.ok(codes.length >= 15, "read the router's codes");
  for (const code of codes) assert.ok(seen.has(code) || code in UNREACHABLE, `${code}: no case answers it`);
});

test("every client error (4xx) of the session layer was answered above", async () => {
  const errors = await import("../../sessions/errors.ts");
  type Made = new (...a: unknown[]) => { code: string; status: number };
  const clientCodes = (Object.values(errors) as unknown[])
    .filter((v): v is Made => typeof v === "function" && v.prototype instanceof errors.TitoError)
    .map((Cls) => new Cls("x", "y", ["z"], "w"))
    .filter((e) => e.status >= 400 && e.status < 500 && e.status !== 499)
    .map((e) => e.code);
  // Reached only with a template that refuses a conversation, or after idle expiry: their own tests.
  // The node cap takes --max-trajectory-nodes turns first: test/sessions/tree/tree-mode.test.ts.
  // And a fork's id placed on another worker needs 2+ workers: test/server/forks.test.ts.
  const elsewhere = [
    "TITO_ERR_TEMPLATE_RENDER",
    "TITO_ERR_SESSION_EXPIRED",
    "TITO_ERR_TRAJECTORY_NODES",
    "TITO_ERR_FORK_PLACEMENT",
  ];
  for (const code of clientCodes) assert.ok(seen.has(code) || elsewhere.includes(code), `${code}: no case answers it`);
});

test.run();
