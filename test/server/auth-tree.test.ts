// Session tokens through the real CLI and its processes (docs/security.md): they survive
// a router kill -9, are refused by an instance with another admin token, and never show
// in logs (the CLI's stderr at debug level), records or upstream requests. What a token
// may do is test/server/auth.test.ts (the tree in the test process).
import type { Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { startCli, type CliRun } from "../helpers/cli.ts";
import type { SupervisionBody } from "../helpers/bodies.ts";
import { call } from "../helpers/server.ts";
import { waitGone } from "../helpers/events.ts";
import { startRecorder, type Upstream } from "../helpers/recording-proxy.ts";

const ADMIN = "admin-secret-for-tests-0123456789";
const admin = { authorization: `Bearer ${ADMIN}` };
const dir = mkdtempSync(join(tmpdir(), "tito-auth-test-"));
let engine: SimEngine;
let recorder: Server;
let recorderUrl: string;
let run: CliRun;
/** Every request the engine got, as the recording proxy in front of it saw it. */
const upstream: Upstream[] = [];

async function start(token: string, workers = 2): Promise<CliRun> {
  return startCli(
    [
      "--port",
      "0",
      "--workers",
      String(workers),
      "--engine",
      recorderUrl,
      "--log-level",
      "debug",
      "--data-dir",
      join(dir, token),
    ],
    { env: { TITO_AUTH_TOKEN: token } },
  );
}

async function stop(r: CliRun): Promise<void> {
  const tree = (await call<SupervisionBody>(r.url, "GET", "/supervision", undefined, admin)).json;
  r.proc.kill("SIGTERM");
  await r.exit;
  if (tree?.router) await waitGone([tree.router.pid!, ...tree.shards.map((s) => s.pid!)], 5_000);
}

async function created(base: string): Promise<{ session_id: string; session_token: string }> {
  const res = await call<{ session_id: string; session_token: string }>(base, "POST", "/sessions", undefined, admin);
  assert.is(res.status, 200, res.text);
  return res.json;
}

const agent = (base: string, id: string, token: string) =>
  new OpenAI({ baseURL: `${base}/sessions/${id}/v1`, apiKey: token, maxRetries: 0 });

test.before(async () => {
  engine = await startSimEngine();
  recorder = await startRecorder(engine.url, upstream);
  const address = recorder.address();
  recorderUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  run = await start(ADMIN);
});

test.after(async () => {
  if (run) await stop(run).catch(() => undefined);
  await new Promise((r) => recorder?.close(r));
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("tokens survive a router kill -9, and another instance's admin token refuses them", async () => {
  const { session_id: id, session_token: token } = await created(run.url);
  const tree = (await call<SupervisionBody>(run.url, "GET", "/supervision", undefined, admin)).json;
  process.kill(tree.router.pid!, "SIGKILL");
  let status = 0;
  for (let i = 0; i < 200 && status !== 200; i++) {
    await new Promise((r) => setTimeout(r, 50));
    status = await agent(run.url, id, token)
      .chat.completions.create({ model: "m", messages: [{ role: "user", content: "after" }] })
      .then(() => 200)
      .catch((err: { status?: number }) => err.status ?? 0);
  }
  assert.is(status, 200, "the same session token chats after the router restarted");

  // The router checks a session token (server/router/router-auth.ts): one worker will do.
  const otherRun = await start("another-admin-token-9876543210", 1);
  try {
    const res = await call(
      otherRun.url,
      "POST",
      `/sessions/${id}/v1/chat/completions`,
      { model: "m", messages: [{ role: "user", content: "hi" }] },
      { authorization: `Bearer ${token}` },
    );
    assert.is(res.status, 403);
  } finally {
    await stop(otherRun);
  }
});

test("no token in logs, records or upstream requests", async () => {
  const { session_id: id, session_token: token } = await created(run.url);
  upstream.length = 0;
  await agent(run.url, id, token).chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] });
  await agent(run.url, id, token).models.list();
  assert.ok(upstream.length >= 2);
  for (const r of upstream) {
    assert.not.ok(JSON.stringify(r).includes(token), `the engine saw the session token: ${r.url}`);
    assert.not.ok(JSON.stringify(r).includes(ADMIN), `the engine saw the admin token: ${r.url}`);
  }
  const records = await call(run.url, "GET", `/sessions/${id}`, undefined, admin);
  assert.not.ok(records.text.includes(token));
  assert.not.ok(records.text.includes(ADMIN));
  assert.not.ok(run.stderr().includes(token), "a debug-level log holds the session token");
  assert.not.ok(run.stderr().includes(ADMIN));
});

test.run();
