// Partial rollouts (issue 42; docs/rl-loop.md, "Partial rollouts"), through the real tree
// (router + a worker process) and the simulated engine, on each engine API: the trainer
// pauses tito-server (keep), updates the engine's weights with SGLang's
// `abort_all_requests` while a turn is at the engine, and resumes with a new version. With
// `--on-engine-abort resume` the aborted turn keeps its first K tokens, waits for the resume,
// continues under the new version and commits one turn whose ids are those of an
// uninterrupted twin session; its records and samples say which version made which tokens.
// Aborted twice, it resumes twice; streamed, the client gets one stream; a worker killed
// while the turn waits commits nothing, and a committed resumed turn replays byte for byte.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, newSession } from "../helpers/server.ts";
import { waitForEvent } from "../helpers/events.ts";
import { startRecorder, type Upstream } from "../helpers/recording-proxy.ts";
import type { Server } from "node:http";
import type { SupervisionEvent } from "../../actors/index.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
const K = 4;

let engine: SimEngine;
/** Every request tito-server sends the engine, through a recording proxy: the routing headers. */
const upstream: Upstream[] = [];
let recorder: Server;
let recorderUrl: string;
/**
 * What happens at the next generation requests: "update" (pause, the engine's update, resume
 * soon), "hold" (the same, no resume), "abort" (the engine's own abort, no pause).
 */
let plan: Array<"update" | "hold" | "abort"> = [];
let server: SessionServer | undefined;
let resumed: Promise<unknown> | undefined;
const dirs: string[] = [];

const post = (url: string, body: unknown) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

test.before(async () => {
  engine = await startSimEngine({
    abortAtToken: K,
    beforeReply: async () => {
      const next = plan.shift();
      if (next === "update" || next === "hold") {
        // The trainer's sequence: pause (keep), update the engine aborting what it serves, resume later.
        assert.is((await post(`${server!.url}/admin/pause`, { in_flight: "keep" })).status, 200);
        const update = await post(`${engine.url}/update_weights_from_disk`, {
          model_path: "ckpt",
          abort_all_requests: true,
          weight_version: "v2",
        });
        assert.is(update.status, 200);
        // Resumed only after this reply is built: the aborted turn must wait for it.
        if (next === "update")
          resumed = new Promise((r) => setTimeout(r, 150)).then(() =>
            post(`${server!.url}/admin/resume`, { weight_version: "v2" }),
          );
      } else if (next === "abort") {
        assert.is((await post(`${engine.url}/pause_generation`, { mode: "abort" })).status, 200);
      }
    },
  });
  recorder = await startRecorder(engine.url, upstream);
  const address = recorder.address();
  recorderUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
});
test.after(async () => {
  await server?.shutdown();
  recorder?.close();
  await engine?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The running server's configuration: a test that needs the same one gets the same server. */
let serving: string | undefined;

/**
 * A one-worker server with these options at version v1: the running one when it has them
 * (each test works on sessions of its own, so the tree is not what they share), else a new
 * one. The tests below are ordered by configuration so each is started once.
 */
async function serve(
  api: Api,
  onEngineAbort: "retry" | "resume" = "resume",
  cacheSalt: "turn" | "session" = "session",
): Promise<SessionServer> {
  const config = `${api} ${onEngineAbort} ${cacheSalt}`;
  if (server && serving === config) {
    assert.is((await post(`${server.url}/admin/resume`, { weight_version: "v1" })).status, 200);
    return server;
  }
  await server?.shutdown();
  serving = config;
  const dataDir = mkdtempSync(join(tmpdir(), "tito-resume-"));
  dirs.push(dataDir);
  server = await startSessionServer({
    engineUrl: recorderUrl,
    engineApi: api,
    workers: 1,
    logLevel: "warn",
    onEngineAbort,
    cacheSalt,
    dataDir,
  });
  assert.is((await post(`${server.url}/admin/resume`, { weight_version: "v1" })).status, 200);
  return server;
}

const TURN = { model: "m", max_tokens: 64, messages: [{ role: "user", content: "Tell me about Paris." }] };

interface Reply {
  choices: Array<{ message: { content: string }; finish_reason: string }>;
  usage: { completion_tokens: number };
}
interface Rec {
  weight_version: string;
  min_weight_version?: string;
  max_weight_version?: string;
  weight_versions?: Array<{ weight_version: string; tokens: number }>;
  resumed?: Array<{ weight_version: string; completion_ids: number[]; logprobs: number[] }>;
}
interface SampleJson {
  tokens: number[];
  rollout_log_probs: number[];
  turns: Array<{
    completion_start: number;
    completion_end: number;
    weight_version: string;
    min_weight_version?: string;
    max_weight_version?: string;
    weight_versions?: Array<{ weight_version: string; start: number; end: number }>;
  }>;
}

async function state(base: string, id: string) {
  const got = await call<{ records: Rec[]; metadata: { accumulated_token_ids: number[] } }>(
    base,
    "GET",
    `/sessions/${id}`,
  );
  const sample = await call<SampleJson>(base, "POST", `/sessions/${id}/samples`);
  return {
    records: got.json.records,
    ids: got.json.metadata.accumulated_token_ids,
    sample: sample.json,
    raw: got.text,
  };
}

/** The twin: the same turn on a fresh session, nothing aborted. */
async function twin(base: string) {
  const id = await newSession(base);
  const res = await call<Reply>(base, "POST", `/sessions/${id}/v1/chat/completions`, TURN);
  assert.is(res.status, 200, res.text);
  return { reply: res.json, ...(await state(base, id)) };
}

/** One turn with a weight update (and the resume) at the engine: its reply, and every generation request sent. */
async function turnAcrossUpdate(base: string, id: string) {
  plan = ["update"];
  const mark = upstream.length;
  const res = await call<Reply>(base, "POST", `/sessions/${id}/v1/chat/completions`, TURN);
  await resumed;
  assert.is(res.status, 200, res.text);
  const generations = upstream
    .slice(mark)
    .filter((u) => /\/(generate|v1\/chat\/completions|v1\/completions)$/.test(u.url));
  return { res, generations };
}

const resumesAsOneTurn = (api: Api) => async () => {
  const base = (await serve(api)).url;
  const whole = await twin(base);
  const id = await newSession(base);
  const { res, generations } = await turnAcrossUpdate(base, id);
  // The aborted request and its continuation both carry the session's routing key, so a
  // gateway keeps the resumed turn on the replica that holds its prefix (docs/engines.md).
  assert.is(generations.length, 2, "the aborted request, then its continuation");
  for (const g of generations) {
    assert.is(g.headers["x-smg-routing-key"], id);
    assert.is(g.headers["x-session-id"], id);
  }
  assert.equal(res.json.choices[0]!.message.content, whole.reply.choices[0]!.message.content);
  assert.is(res.json.usage.completion_tokens, whole.reply.usage.completion_tokens);
  const got = await state(base, id);
  assert.equal(got.ids, whole.ids, "the uninterrupted run's ids: first K, then the continuation");
  assert.is(got.records.length, 1, "one turn committed");
  const record = got.records[0]!;
  const n = whole.reply.usage.completion_tokens;
  assert.ok(n > K, `the completion (${n}) is longer than K`);
  assert.equal(
    record.resumed?.map((p) => [p.weight_version, p.completion_ids.length]),
    [["v1", K]],
  );
  assert.equal(record.resumed![0]!.completion_ids, whole.ids.slice(whole.ids.length - n, whole.ids.length - n + K));
  assert.is(record.weight_version, "v1");
  assert.is(record.min_weight_version, "v1");
  assert.is(record.max_weight_version, "v2");
  assert.equal(record.weight_versions, [
    { weight_version: "v1", tokens: K },
    { weight_version: "v2", tokens: n - K },
  ]);
  // The sample: the twin's tokens and logprobs, the two versions meeting at token K.
  assert.equal(got.sample.tokens, whole.sample.tokens);
  assert.equal(got.sample.rollout_log_probs, whole.sample.rollout_log_probs);
  const turn = got.sample.turns[0]!;
  assert.is(turn.completion_end - turn.completion_start, n);
  assert.equal(turn.weight_versions, [
    { weight_version: "v1", start: turn.completion_start, end: turn.completion_start + K },
    { weight_version: "v2", start: turn.completion_start + K, end: turn.completion_end },
  ]);
  assert.is(whole.sample.turns[0]!.weight_versions, undefined, "a turn never aborted has one version");
};

const abortedTwice = async () => {
  const base = (await serve("sglang-generate")).url;
  const whole = await twin(base);
  const id = await newSession(base);
  plan = ["update", "abort"];
  const res = await call<Reply>(base, "POST", `/sessions/${id}/v1/chat/completions`, TURN);
  await resumed;
  assert.is(res.status, 200, res.text);
  const got = await state(base, id);
  assert.equal(got.ids, whole.ids);
  assert.equal(
    got.records[0]!.resumed?.map((p) => [p.weight_version, p.completion_ids.length]),
    [
      ["v1", K],
      ["v2", K],
    ],
  );
  assert.equal(got.sample.rollout_log_probs, whole.sample.rollout_log_probs);

  const sid = await newSession(base);
  plan = ["update"];
  const streamed = await fetch(`${base}/sessions/${sid}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...TURN, stream: true }),
  });
  const text = await streamed.text();
  await resumed;
  const events = text
    .split("\n\n")
    .filter((e) => e.startsWith("data: "))
    .map((e) => e.slice(6));
  assert.is(events.at(-1), "[DONE]");
  const chunks = events
    .slice(0, -1)
    .map((e) => JSON.parse(e) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }> });
  const content = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
  assert.is(content, whole.reply.choices[0]!.message.content, "every delta once, none missing");
  assert.is(chunks.filter((c) => c.choices[0]?.finish_reason).length, 1, "exactly one finish");
  assert.equal((await state(base, sid)).ids, whole.ids);
};

// The salt an engine request carries (sessions/upstream-keys.ts): SGLang's `extra_key` on
// /generate, `cache_salt` on the chat route and vLLM's completions.
const saltOf = (u: Upstream) => {
  const body = JSON.parse(u.body) as { extra_key?: string; cache_salt?: string };
  return body.extra_key ?? body.cache_salt;
};

const cacheSalts = (api: Api) => async () => {
  // `session` first: the server the tests before left running.
  for (const [mode, salts] of [
    ["session", ["v1", "v1"]],
    ["turn", ["v1", "v2"]],
  ] as const) {
    const base = (await serve(api, "resume", mode)).url;
    const { generations } = await turnAcrossUpdate(base, await newSession(base));
    // Under `turn` the continuation is prefilled by v2's weights: v1's salt would let the
    // engine reuse the KV v1 computed for the prompt and the aborted part.
    assert.equal(generations.map(saltOf), salts, `--cache-salt ${mode}`);
  }
};

const retryAnswers503 = async () => {
  const base = (await serve("vllm-completions", "retry")).url;
  const id = await newSession(base);
  plan = ["abort"];
  const res = await call<{ code: string }>(base, "POST", `/sessions/${id}/v1/chat/completions`, TURN);
  assert.is(res.status, 503, res.text);
  assert.is(res.json.code, "TITO_ERR_ENGINE_ABORTED");
  assert.is((await state(base, id)).records.length, 0);
};

const killedWhileHeld = async () => {
  const srv = await serve("sglang-chat");
  const base = srv.url;
  const events: SupervisionEvent[] = [];
  srv.on("event", (e) => events.push(e));
  const id = await newSession(base);
  plan = ["update"];
  const done = await call<Reply>(base, "POST", `/sessions/${id}/v1/chat/completions`, TURN);
  await resumed;
  assert.is(done.status, 200, done.text);
  const before = await state(base, id);

  // The next turn is aborted and waits at the closed door: the worker dies there.
  const turn2 = {
    ...TURN,
    messages: [...TURN.messages, done.json.choices[0]!.message, { role: "user", content: "And Rome?" }],
  };
  plan = ["hold"];
  const pending = call(base, "POST", `/sessions/${id}/v1/chat/completions`, turn2);
  // The engine's abort has answered when the plan is used up; the turn then waits for the resume.
  while (plan.length > 0) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 100));
  process.kill(srv.tree().shards[0]!.pid!, "SIGKILL");
  const failed = await pending;
  assert.is(failed.status, 503, failed.text);
  await waitForEvent(
    srv,
    () => events,
    (e) => e.actor === "shard-0" && e.kind === "restarted",
  );
  assert.is((await post(`${base}/admin/resume`, { weight_version: "v3" })).status, 200);
  const after = await state(base, id);
  assert.is(after.raw, before.raw, "the journal replays the resumed turn byte for byte, and nothing of the killed one");
  assert.equal(after.sample, before.sample);
};

// Ordered by the server each needs (serve), so each configuration starts one tree.
const resumesTitle = (api: Api) =>
  `${api}: a turn aborted at token ${K} by a weight update resumes under the new version as one turn`;
const saltsTitle = (api: Api) =>
  `${api}: the continuation's cache salt is its own version's under --cache-salt turn, the session's under session`;
test(resumesTitle("sglang-chat"), resumesAsOneTurn("sglang-chat"));
test(
  "sglang-chat: kill -9 of the worker while a turn waits to resume commits nothing; a resumed turn replays exactly",
  killedWhileHeld,
);
test(resumesTitle("sglang-generate"), resumesAsOneTurn("sglang-generate"));
test("sglang-generate: a turn aborted twice resumes twice; streamed, it is one stream", abortedTwice);
test(saltsTitle("sglang-generate"), cacheSalts("sglang-generate"));
test(resumesTitle("vllm-completions"), resumesAsOneTurn("vllm-completions"));
test(saltsTitle("vllm-completions"), cacheSalts("vllm-completions"));
test("vllm-completions: retry (the default) answers the abort with the 503 and commits nothing", retryAnswers503);

test.run();
