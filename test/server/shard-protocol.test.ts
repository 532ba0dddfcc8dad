// The shard protocol over a real channel: the router's requestShard on one side, the
// worker's handler (a real session core) on the other. A frame that is not a shard request
// is answered with a coded error and the channel keeps serving.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { MemoryRecordStore, type SessionCore } from "../../sessions/index.ts";
import { coreFor } from "../helpers/core.ts";
import type { Meta } from "../../transport/index.ts";
import { requestShard } from "../../server/protocol/shard-protocol.ts";
import { workerHandler } from "../../server/worker/worker-handler.ts";
import { WorkerMetrics } from "../../server/worker/worker-metrics.ts";
import { qwen3 } from "../sessions/fixtures.ts";
import { channelPair, tempDir, type Pair } from "../transport/pair.ts";

const dir = tempDir("tito-shardproto-");
let pair: Pair;
let core: SessionCore;

test.before(async () => {
  // The engine is never called: no op here reaches it.
  core = coreFor({
    engineUrl: "http://127.0.0.1:9",
    tokenizerFolder: qwen3(),
    recordStore: new MemoryRecordStore(),
  });
  pair = await channelPair(dir.path("shard.sock"));
  pair.server.serve(workerHandler(core, new WorkerMetrics(0, () => core.sessionCount())));
});

test.after(async () => {
  await pair?.close();
  await core?.close();
  dir.remove();
});

async function refused(meta: Meta): Promise<{ code: string; status: number; message: string }> {
  try {
    await pair.client.request(meta);
  } catch (err) {
    return err as { code: string; status: number; message: string };
  }
  throw new Error(`the worker answered ${JSON.stringify(meta)}`);
}

async function json(res: { body: { collect(): Promise<Buffer[]> } }): Promise<unknown> {
  return JSON.parse(Buffer.concat(await res.body.collect()).toString("utf8"));
}

test("an unknown op is a TITO_ERR_SHARD_REQUEST error reply; the channel keeps serving", async () => {
  const err = await refused({ op: "compact", sessionId: "s" });
  assert.is(err.code, "TITO_ERR_SHARD_REQUEST");
  assert.is(err.status, 500);
  assert.is(err.message, 'shard request not understood: unknown op "compact"');
  assert.is((await refused({ sessionId: "s" })).message, "shard request not understood: no op");
  const health = await requestShard(pair.client, { op: "health" });
  assert.is(health.status, 200);
  assert.equal(await json(health), { status: "ok" });
});

test("a known op without its fields is refused by name, before the core runs it", async () => {
  const chat = await refused({ op: "chat", sessionId: "s", method: "POST", query: "", headers: {} });
  assert.is(chat.code, "TITO_ERR_SHARD_REQUEST");
  assert.is(chat.message, 'shard request not understood: op "chat" without a valid path');
  const proxy = await refused({ op: "proxy", sessionId: "s", method: "GET", path: "/x", query: "", headers: "h" });
  assert.is(proxy.message, 'shard request not understood: op "proxy" without a valid headers');
  const get = await refused({ op: "get", sessionId: 7 });
  assert.is(get.message, 'shard request not understood: op "get" without a valid sessionId');
  const versioned = await refused({
    op: "chat",
    sessionId: "s",
    method: "POST",
    path: "/v1/chat/completions",
    query: "",
    headers: {},
    weightVersion: 3,
  });
  assert.is(versioned.message, 'shard request not understood: op "chat" with a weightVersion that is not a string');
});

test("abort-turns with no turn in flight aborts none", async () => {
  const res = await requestShard(pair.client, { op: "abort-turns" });
  assert.is(res.status, 200);
  assert.equal(await json(res), { aborted: 0 });
});

test("a refused op is not counted: only known ops become metrics labels", async () => {
  await refused({ op: "compact", sessionId: "s" });
  const metrics = (await json(await requestShard(pair.client, { op: "metrics" }))) as {
    name: string;
    values: { labels: Record<string, unknown> }[];
  }[];
  const ops = metrics.find((m) => m.name === "tito_worker_operation_duration_seconds");
  assert.ok(ops, "the worker reports its operations");
  assert.not.ok(ops.values.some((v) => v.labels.op === "compact"));
});

test("the router's shapes reach the core: create and get by id, chat with the client's request", async () => {
  const sessionId = "0123456789abcdef0123456789abcdef";
  const created = await requestShard(pair.client, { op: "create", sessionId });
  assert.is(created.status, 200);
  assert.is(created.headers["content-type"], "application/json");
  assert.equal(await json(created), { session_id: sessionId });
  const got = await requestShard(pair.client, { op: "get", sessionId });
  assert.is(got.status, 200);
  assert.is(((await json(got)) as { session_id: string }).session_id, sessionId);
  const chat = await requestShard(
    pair.client,
    { op: "chat", sessionId, method: "POST", path: "/v1/chat/completions", query: "", headers: {} },
    Buffer.from("{not json"),
  );
  assert.is(chat.status, 400);
  assert.match(((await json(chat)) as { error: string }).error, /^invalid JSON body/);
  const deleted = await requestShard(pair.client, { op: "delete", sessionId });
  assert.is(deleted.status, 204);
  await deleted.body.collect();
  assert.is((await requestShard(pair.client, { op: "get", sessionId })).status, 404);
});

test.run();
