// Tree mode under `"stream": true` on the chat route (issue 43; docs/trajectories.md), through
// the tree in this process (test/helpers/tree.ts) on every engine API, against the simulated
// engine streaming in that API's wire format: the same conversation, streamed in one
// tree-mode session and not in another, with a retried turn (a sibling marked `retry_of`), a
// rewritten first message (a new root, not an error) and a node the engine cut by `length`
// (extending it is a 409 naming it, before any event; retrying it is a sibling). Both
// sessions end with the same nodes, the same prompt and completion ids in their records, the
// same outline and the same samples, per leaf and packed. Two branches streaming at once each
// commit under their own parent; one whose commit finds the node cap reached meanwhile ends
// with an error event carrying TITO_ERR_TRAJECTORY_NODES, never `data: [DONE]`, and records
// nothing.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { WireMessage } from "../helpers/bodies.ts";
import { call } from "../helpers/server.ts";
import { recordIds } from "../helpers/turn-records.ts";
import { assertSameTrees, CONVERSATION_TREE, treeRecords } from "../helpers/tree-records.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
const APIS: Api[] = ["sglang-chat", "sglang-generate", "vllm-completions"];

let engine: SimEngine;
const servers = new Map<Api, InProcessTree>();
/** An engine that holds the first request after holdNext() until it is released. */
let gated: SimEngine;
let gate: { arrived: () => void; released: Promise<void> } | undefined;
/** Tree mode by default, a cap of 4 nodes, on the gated engine. */
let capped: InProcessTree;

function holdNext(): { arrived: Promise<void>; release: () => void } {
  let arrived!: () => void;
  let release!: () => void;
  const arrivedP = new Promise<void>((r) => (arrived = r));
  gate = { arrived, released: new Promise<void>((r) => (release = r)) };
  return { arrived: arrivedP, release };
}

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: sharedFolder() });
  for (const api of APIS)
    servers.set(api, await startTree({ engineUrl: engine.url, engineApi: api, workers: 1, logLevel: "silent" }));
  gated = await startSimEngine({
    tokenizerFolder: sharedFolder(),
    beforeReply: async () => {
      const held = gate;
      gate = undefined;
      held?.arrived();
      await held?.released;
    },
  });
  const trajectory = { mode: "tree" as const, maxNodes: 4 };
  capped = await startTree({ engineUrl: gated.url, workers: 1, logLevel: "silent", core: { trajectory } });
});
test.after(async () => {
  for (const server of [...servers.values(), capped]) await server?.shutdown();
  await engine?.close();
  await gated?.close();
});

interface Turn {
  status: number;
  /** The error body of a refused turn. */
  error?: { code?: string; error?: string };
  message?: WireMessage;
  finish?: string | null;
}

/** One chat turn, streamed or not; a streamed one must end with `data: [DONE]` (committed) and carry no error event. */
async function turn(base: string, id: string, messages: WireMessage[], streamed: boolean, extra = {}): Promise<Turn> {
  const res = await fetch(`${base}/sessions/${id}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages, ...extra, ...(streamed ? { stream: true } : {}) }),
  });
  const text = await res.text();
  if (res.status !== 200) return { status: res.status, error: JSON.parse(text) };
  if (!streamed) {
    const choice = JSON.parse(text).choices[0];
    return {
      status: 200,
      message: { role: "assistant", content: choice.message.content },
      finish: choice.finish_reason,
    };
  }
  assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
  assert.ok(text.endsWith("data: [DONE]\n\n"), `a streamed turn commits before [DONE]: ${text.slice(-300)}`);
  let content = "";
  let finish: string | null = null;
  for (const event of text.slice(0, -2).split("\n\n").slice(0, -1)) {
    const chunk = JSON.parse(event.slice("data: ".length));
    assert.is(chunk.error, undefined, event);
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? "";
      finish = choice.finish_reason ?? finish;
    }
  }
  return { status: 200, message: { role: "assistant", content }, finish };
}

const SYS: WireMessage = { role: "system", content: "You are terse." };
const user = (content: string): WireMessage => ({ role: "user", content });

/** The conversation both sessions hold: retries, a rewrite, a cut node; the same steps streamed or not. */
async function converse(base: string, streamed: boolean): Promise<string> {
  const created = await call<{ session_id: string }>(base, "POST", "/sessions", { trajectory: "tree" });
  assert.is(created.status, 200, created.text);
  const id = created.json.session_id;
  const ok = async (messages: WireMessage[], extra = {}) => {
    const t = await turn(base, id, messages, streamed, extra);
    assert.is(t.status, 200, JSON.stringify(t.error));
    return t;
  };
  const a0 = (await ok([SYS, user("one")])).message!; // n0
  const h1 = [SYS, user("one"), a0, user("two")];
  await ok(h1); // n1
  const a2 = (await ok(h1)).message!; // n2: retries n1
  await ok([SYS, user("one, said otherwise")]); // n3: a rewritten first message, a new root
  const cut = await ok([SYS, user("long")], { max_tokens: 1 }); // n4, cut by length
  assert.is(cut.finish, "length");
  const refused = await turn(base, id, [SYS, user("long"), cut.message!, user("go on")], streamed);
  assert.is(refused.status, 409, "extending a node cut by length");
  assert.is(refused.error?.code, "TITO_ERR_NODE_CUT");
  assert.match(refused.error?.error ?? "", /node n4/);
  await ok([SYS, user("long")]); // n5: retries n4
  await ok([...h1, a2, user("three")]); // n6: under n2, the branch the retry made
  return id;
}

for (const api of APIS)
  test(`${api}: a streamed tree-mode session ends with the same tree, records and samples as an unstreamed one`, async () => {
    const base = servers.get(api)!.url;
    const streamed = await converse(base, true);
    const whole = await converse(base, false);
    await assertSameTrees(base, streamed, whole, CONVERSATION_TREE, [
      {},
      { packed: true },
      { drop_retries: true },
      { leaves: ["n1", "n4"] },
    ]);
  });

/** A streamed turn's raw events, read to the end. */
async function rawStream(base: string, id: string, messages: WireMessage[]): Promise<string> {
  const res = await fetch(`${base}/sessions/${id}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages, stream: true }),
  });
  assert.is(res.status, 200);
  return res.text();
}

test("two branches streaming at once: each commits under its parent; one past the cap ends in an error event", async () => {
  const base = capped.url;
  const id = (await call<{ session_id: string }>(base, "POST", "/sessions")).json.session_id;
  const a0 = (await turn(base, id, [SYS, user("one")], true)).message!; // n0
  // A streamed turn under n0 held at the engine while another branch under n0 commits.
  let held = holdNext();
  const first = rawStream(base, id, [SYS, user("one"), a0, user("two")]);
  await held.arrived;
  assert.is((await turn(base, id, [SYS, user("one"), a0, user("two, said otherwise")], true)).status, 200); // n1
  held.release();
  assert.ok((await first).endsWith("data: [DONE]\n\n"), "committed as n2");
  // Three nodes: one held turn is placed, the fourth node commits meanwhile, the held one finds the cap.
  held = holdNext();
  const late = rawStream(base, id, [SYS, user("four")]);
  await held.arrived;
  assert.is((await turn(base, id, [SYS, user("five")], true)).status, 200); // n3, the last node
  held.release();
  const events = (await late).trimEnd().split("\n\n");
  assert.not.ok(events.includes("data: [DONE]"), "a turn that was not committed never looks complete");
  const error = JSON.parse(events.at(-1)!.slice("data: ".length)).error;
  assert.equal([error.type, error.code], ["TITO_ERR_TRAJECTORY_NODES", 409]);
  const records = await treeRecords(base, id);
  assert.equal(
    records.map((r) => [r.node_id, r.parent, r.retry_of]),
    [
      ["n0", null, null],
      ["n1", "n0", null],
      ["n2", "n0", null],
      ["n3", null, null],
    ],
  );
  // The held turn's prompt extended n0 exactly, though n1 had moved the session's view meanwhile.
  const [n0, n2] = [recordIds(records[0]!), recordIds(records[2]!)];
  assert.equal(n2.prompt.slice(0, n0.prompt.length + n0.completion.length), [...n0.prompt, ...n0.completion]);
});

test.run();
