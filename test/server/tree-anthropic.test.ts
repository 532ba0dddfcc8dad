// Tree mode on the Anthropic Messages route (POST /sessions/{id}/v1/messages; issue 43,
// docs/trajectories.md), with the official `@anthropic-ai/sdk` client through the tree in
// this process (test/helpers/tree.ts) against the simulated engine (a thinking Qwen3, so
// thinking blocks go round too): a retried turn is a sibling marked `retry_of`, a rewritten
// first message a new root, extending a node cut by `max_tokens` a 409 in Anthropic's error
// shape with TITO_ERR_NODE_CUT inside, the node cap one with TITO_ERR_TRAJECTORY_NODES;
// streamed and not, ending with the same nodes, records, outline and samples.
import { test } from "uvu";
import * as assert from "uvu/assert";
import Anthropic from "@anthropic-ai/sdk";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call } from "../helpers/server.ts";
import { recordIds } from "../helpers/turn-records.ts";
import { assertSameTrees, CONVERSATION_TREE, treeRecords, treeShape } from "../helpers/tree-records.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

type Api = "sglang-chat" | "sglang-generate";
const APIS: Api[] = ["sglang-chat", "sglang-generate"];

interface ErrorBody {
  type: string;
  error: { type: string; message: string; code?: string };
}

let engine: SimEngine;
const servers = new Map<Api, InProcessTree>();
/** Tree mode by default (--trajectory tree) and a cap of 3 nodes. */
let capped: InProcessTree;

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: sharedFolder(), reasoning: true });
  for (const api of APIS)
    servers.set(api, await startTree({ engineUrl: engine.url, engineApi: api, workers: 1, logLevel: "silent" }));
  const trajectory = { mode: "tree" as const, maxNodes: 3 };
  capped = await startTree({ engineUrl: engine.url, workers: 1, logLevel: "silent", core: { trajectory } });
});
test.after(async () => {
  for (const server of [...servers.values(), capped]) await server?.shutdown();
  await engine?.close();
});

const SYSTEM = "You are terse.";
const user = (content: string): Anthropic.MessageParam => ({ role: "user", content });
const said = (m: Anthropic.Message): Anthropic.MessageParam => ({ role: "assistant", content: m.content });

async function treeSession(base: string): Promise<{ id: string; anthropic: Anthropic }> {
  const created = await call<{ session_id: string }>(base, "POST", "/sessions", { trajectory: "tree" });
  assert.is(created.status, 200, created.text);
  const id = created.json.session_id;
  return { id, anthropic: new Anthropic({ baseURL: `${base}/sessions/${id}`, apiKey: "unused", maxRetries: 0 }) };
}

/** One turn by the SDK, streamed (events to `message_stop`) or not. */
async function ask(anthropic: Anthropic, messages: Anthropic.MessageParam[], streamed: boolean, maxTokens = 400) {
  const params = { model: "m", max_tokens: maxTokens, system: SYSTEM, messages };
  if (!streamed) return anthropic.messages.create(params);
  const stream = anthropic.messages.stream(params);
  const kinds: string[] = [];
  for await (const event of stream) kinds.push(event.type);
  assert.is(kinds.at(-1), "message_stop", "a streamed turn ends message_stop once committed");
  return stream.finalMessage();
}

/** The SDK's error for a refused turn, streamed or not: the status, and the body in Anthropic's shape. */
async function refused(anthropic: Anthropic, messages: Anthropic.MessageParam[], streamed: boolean) {
  try {
    await ask(anthropic, messages, streamed);
  } catch (err) {
    assert.instance(err, Anthropic.APIError);
    const e = err as InstanceType<typeof Anthropic.APIError>;
    return { status: e.status, body: e.error as ErrorBody };
  }
  return assert.unreachable("the turn is refused") as never;
}

/** The conversation of every case: retries, a rewrite, a cut node; the same steps streamed or not. */
async function converse(base: string, streamed: boolean): Promise<string> {
  const { id, anthropic } = await treeSession(base);
  const a0 = await ask(anthropic, [user("one")], streamed); // n0
  const h1 = [user("one"), said(a0), user("two")];
  await ask(anthropic, h1, streamed); // n1
  const a2 = await ask(anthropic, h1, streamed); // n2: retries n1
  await ask(anthropic, [user("one, said otherwise")], streamed); // n3: a new root
  const cut = await ask(anthropic, [user("long")], streamed, 2); // n4, cut by max_tokens
  assert.is(cut.stop_reason, "max_tokens");
  const no = await refused(anthropic, [user("long"), said(cut), user("go on")], streamed);
  assert.is(no.status, 409);
  assert.is(no.body.type, "error");
  assert.is(no.body.error.type, "invalid_request_error");
  assert.is(no.body.error.code, "TITO_ERR_NODE_CUT");
  assert.match(no.body.error.message, /node n4/);
  await ask(anthropic, [user("long")], streamed); // n5: retries n4
  await ask(anthropic, [...h1, said(a2), user("three")], streamed); // n6: under n2
  return id;
}

for (const api of APIS)
  test(`${api}: retries, a rewrite and a cut node make the same tree streamed and not`, async () => {
    const base = servers.get(api)!.url;
    const streamed = await converse(base, true);
    const whole = await converse(base, false);
    const rs = await assertSameTrees(base, streamed, whole, CONVERSATION_TREE, [
      {},
      { packed: true },
      { drop_retries: true },
    ]);
    // n6's prompt carries n2's completion (not n1's) exactly: the SDK's history attached there.
    const [n2, n6] = [recordIds(rs[2]!), recordIds(rs[6]!)];
    assert.equal(n6.prompt.slice(0, n2.prompt.length + n2.completion.length), [...n2.prompt, ...n2.completion]);
  });

for (const streamed of [false, true])
  test(`the node cap, ${streamed ? "streamed" : "not streamed"}: a 409 in Anthropic's shape, TITO_ERR_TRAJECTORY_NODES inside`, async () => {
    const created = await call<{ session_id: string }>(capped.url, "POST", "/sessions");
    const id = created.json.session_id;
    const anthropic = new Anthropic({ baseURL: `${capped.url}/sessions/${id}`, apiKey: "unused", maxRetries: 0 });
    for (const text of ["a", "b", "c"]) await ask(anthropic, [user(text)], streamed);
    const no = await refused(anthropic, [user("d")], streamed);
    assert.is(no.status, 409);
    assert.equal(
      [no.body.type, no.body.error.type, no.body.error.code],
      ["error", "invalid_request_error", "TITO_ERR_TRAJECTORY_NODES"],
    );
    assert.equal((await treeRecords(capped.url, id)).map(treeShape), [
      ["n0", null, null, "stop"],
      ["n1", null, null, "stop"],
      ["n2", null, null, "stop"],
    ]);
  });

test.run();
