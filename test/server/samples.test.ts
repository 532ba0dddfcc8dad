// POST /sessions/{id}/samples through the tree in this process (test/helpers/tree.ts:
// the router app, 2 workers over Unix sockets, the simulated engine), and the handle's
// samples() (the embedding API's, same route and error). examples/rollout.ts with a worker
// killed mid-run is test/server/rollout-example.test.ts (real processes).
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SamplesRequestError } from "../../server/host/errors.ts";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import type { SampleBody, SessionBody } from "../helpers/bodies.ts";
import { call, newSession, toolLoop } from "../helpers/server.ts";
import { readSafetensors } from "../helpers/safetensors.ts";
import { startTree, type InProcessTree } from "../helpers/tree.ts";

let server: InProcessTree;

test.before(async () => {
  server = await startTree({ workers: 2 });
});

test.after(async () => {
  await server?.shutdown();
});

test("the route answers from the owning shard: JSON, safetensors by Accept or ?format=, 400 and 404", async () => {
  const id = await newSession(server.url);
  const { messages } = await toolLoop(server.url, id);
  const got = await call<SessionBody>(server.url, "GET", `/sessions/${id}`);
  const res = await call<SampleBody>(server.url, "POST", `/sessions/${id}/samples`);
  assert.is(res.status, 200, res.text);
  assert.is(res.headers.get("x-tito-shard"), String(shardOf(id, 2)));
  assert.match(res.headers.get("content-type")!, "application/json");
  const s = res.json;
  assert.equal(s.tokens, got.json.metadata.accumulated_token_ids);
  assert.is(s.turns.length, messages.filter((m) => m.role === "assistant").length);
  assert.is(s.loss_mask.length, s.response_length);
  assert.is(
    s.loss_mask.reduce((a: number, b: number) => a + b, 0),
    got.json.records.reduce((n, r) => n + r.response.choices[0].meta_info.completion_tokens, 0),
  );

  for (const [path, headers] of [
    [`/sessions/${id}/samples`, { accept: "application/octet-stream" }],
    [`/sessions/${id}/samples?format=safetensors`, {}],
  ] as const) {
    const raw = await fetch(server.url + path, { method: "POST", headers, body: JSON.stringify({ max_seq_len: 40 }) });
    assert.is(raw.status, 200);
    assert.is(raw.headers.get("content-type"), "application/octet-stream");
    const { tensors, metadata } = readSafetensors(Buffer.from(await raw.arrayBuffer()));
    assert.equal(tensors.tokens!.values, s.tokens.slice(0, 40));
    assert.is(metadata.status, "truncated");
  }

  const bad = await call(server.url, "POST", `/sessions/${id}/samples`, { max_seq_len: -1 });
  assert.equal(
    [bad.status, bad.json],
    [400, { error: "max_seq_len must be a positive integer, got -1", code: "TITO_ERR_INVALID_SAMPLE_REQUEST" }],
  );
  const unknown = await call(server.url, "POST", "/sessions/0123456789abcdef0123456789abcdef/samples");
  assert.equal(
    [unknown.status, unknown.json],
    [
      404,
      { error: "session not found: session_id=0123456789abcdef0123456789abcdef", code: "TITO_ERR_SESSION_NOT_FOUND" },
    ],
  );
  // Other methods on /samples are proxied to the engine, as documented.
  assert.is((await call(server.url, "GET", `/sessions/${id}/samples`)).status, 404);

  // The embedding handle: the same JSON, and a coded error with the route's status.
  assert.equal(await server.samples(id), s);
  assert.equal((await server.samples(id, { maxSeqLen: 40 })).tokens, s.tokens.slice(0, 40));
  try {
    await server.samples("no-such-session");
    assert.unreachable("samples of an unknown session must reject");
  } catch (err) {
    assert.instance(err, SamplesRequestError);
    assert.equal(
      [(err as SamplesRequestError).status, (err as SamplesRequestError).code],
      [404, "TITO_ERR_SAMPLES_REQUEST"],
    );
    assert.match((err as Error).message, "session not found: session_id=no-such-session");
  }
});

test.run();
