// A session's budget and its finished flag survive kill -9 of its worker (sessions/journal:
// the CREATE entry keeps the budget, a FINISH entry the abort): after the supervised
// restart replays the journal, a session created with max_turns 1 still refuses its second
// turn, one created with max_total_tokens still refuses a prompt over it, an aborted one
// still answers 409, and a session with neither takes turns as before. The restart is
// awaited as a supervision event, never slept on.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSessionServer, type SessionServer } from "../../index.ts";
import type { SupervisionEvent } from "../../actors/index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { waitForEvent } from "../helpers/events.ts";
import type { SessionCreatedBody } from "../helpers/bodies.ts";
import { call, chat } from "../helpers/server.ts";

let engine: SimEngine;
let server: SessionServer;
const dataRoot = mkdtempSync(join(tmpdir(), "tito-durable-state-test-"));

test.before(async () => {
  engine = await startSimEngine();
  server = await startSessionServer({
    engineUrl: engine.url,
    engineApi: "sglang-generate",
    workers: 1,
    dataDir: dataRoot,
    restartBackoffMs: 50,
    maxRestarts: 10,
    logLevel: "warn",
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
  rmSync(dataRoot, { recursive: true, force: true });
});

const ASK = [{ role: "user", content: "What is the weather in Paris?" }];

async function create(budget?: unknown): Promise<string> {
  const res = await call<SessionCreatedBody>(server.url, "POST", "/sessions", budget);
  assert.is(res.status, 200, res.text);
  return res.json.session_id;
}

async function killAndAwaitRestart(): Promise<void> {
  const events: SupervisionEvent[] = [];
  const onEvent = (e: SupervisionEvent) => events.push(e);
  server.on("event", onEvent);
  process.kill(server.tree().shards[0]!.pid!, "SIGKILL");
  await waitForEvent(
    server,
    () => events,
    (e) => e.actor === "shard-0" && e.kind === "restarted",
  );
  server.off("event", onEvent);
}

test("kill -9: budgets and the finished flag come back with the journal", async () => {
  const base = server.url;
  const oneTurn = await create({ max_turns: 1 });
  const first = await chat(base, oneTurn, ASK);
  assert.is(first.res.status, 200);
  const next = [...ASK, first.message!, { role: "user", content: "More?" }];
  const probe = await chat(base, await create(), ASK);
  const promptTokens = probe.res.json.usage.prompt_tokens;
  const tight = await create({ max_total_tokens: promptTokens });
  const aborted = await create();
  assert.is((await call(base, "POST", `/sessions/${aborted}/abort`)).status, 200);
  const plain = await create();
  // Before the restart, as after it.
  assert.is((await chat(base, oneTurn, next)).res.status, 400);
  assert.is((await chat(base, aborted, ASK)).res.status, 409);

  await killAndAwaitRestart();

  const again = await chat<{ error: string; code: string }>(base, oneTurn, next);
  assert.is(again.res.status, 400, again.res.text);
  assert.is(again.res.json.code, "TITO_ERR_BUDGET");
  assert.match(again.res.json.error, "max_turns is 1");
  const over = await chat<{ error: string }>(base, tight, ASK);
  assert.is(over.res.status, 400, over.res.text);
  assert.match(over.res.json.error, `max_total_tokens is ${promptTokens}`);
  const finished = await chat<{ error: string; code: string }>(base, aborted, ASK);
  assert.is(finished.res.status, 409, finished.res.text);
  assert.is(finished.res.json.code, "TITO_ERR_SESSION_FINISHED");
  assert.is((await call(base, "GET", `/sessions/${aborted}`)).status, 200, "its records are still served");
  assert.is((await chat(base, plain, ASK)).res.status, 200);
});

test.run();
