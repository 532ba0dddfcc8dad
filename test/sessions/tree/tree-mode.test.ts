// Tree mode on the session core against the simulated engine (docs/trajectories.md): retries
// and rewritten histories become branches, never rollbacks; samples per leaf are exact along
// their paths (checked against the records, written independently here); a packed sample
// holds shared tokens once with their leaf count; the node cap and a `length` parent are
// 409s; a journal replays the same tree byte for byte.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { coreFor, responseText } from "../../helpers/core.ts";
import { JournalRecordStore, type CoreResponse, type SessionCore } from "../../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../../server/sim-engine/sim-engine.ts";
import type { SessionRecord, WireMessage } from "../../helpers/bodies.ts";
import { readSafetensors } from "../../helpers/safetensors.ts";
import { qwen3 } from "../fixtures.ts";

const folder = qwen3();
let engine: SimEngine;
let core: SessionCore;

interface TreeRecord extends SessionRecord {
  node_id: string;
  parent: string | null;
  retry_of: string | null;
  finish_reason: string | null;
}
interface LeafSample {
  leaf: string;
  tokens: number[];
  loss_mask: number[];
  rollout_log_probs: number[];
  response_length: number;
}

const req = (body: unknown, query = "") => ({
  method: "POST",
  path: "/",
  query,
  headers: { "content-type": "application/json" },
  body: Buffer.from(typeof body === "string" ? body : JSON.stringify(body)),
});
const json = async (r: CoreResponse) => JSON.parse(await responseText(r));

async function create(c: SessionCore, body: unknown = { trajectory: "tree" }): Promise<string> {
  const r = await c.create(undefined, Buffer.from(JSON.stringify(body)));
  assert.is(r.status, 200);
  return (await json(r)).session_id;
}

async function turn(c: SessionCore, id: string, messages: WireMessage[], extra = {}): Promise<WireMessage> {
  const r = await c.chat(id, req({ model: "m", messages, ...extra }));
  assert.is(r.status, 200, await responseText(r));
  const m = (await json(r)).choices[0].message;
  return { role: "assistant", content: m.content };
}

async function records(c: SessionCore, id: string): Promise<TreeRecord[]> {
  return (await json(await c.get(id))).records;
}

async function samples(c: SessionCore, id: string, body: unknown): Promise<LeafSample[]> {
  const r = await c.samples(id, req(body));
  assert.is(r.status, 200, await responseText(r));
  return (await json(r)).samples;
}

/** What a leaf's sample must be, from the records on its path alone. */
function expected(path: TreeRecord[]) {
  const last = path.at(-1)!;
  const completion = (r: TreeRecord) =>
    (r.response.choices[0].meta_info.output_token_logprobs as [number, number][]).map(([lp, id]) => ({ lp, id }));
  const tokens = [...last.request.input_ids, ...completion(last).map((e) => e.id)];
  const first = path[0]!.request.input_ids.length;
  const mask = new Array<number>(tokens.length - first).fill(0);
  const logprobs = new Array<number>(tokens.length - first).fill(0);
  for (const r of path) {
    const start = r.request.input_ids.length;
    completion(r).forEach((e, i) => {
      // A later prompt carries every earlier turn's tokens exactly.
      assert.is(tokens[start + i], e.id);
      mask[start + i - first] = 1;
      logprobs[start + i - first] = e.lp;
    });
  }
  return { tokens, mask, logprobs };
}

function pathOf(all: TreeRecord[], leaf: string): TreeRecord[] {
  const byId = new Map(all.map((r) => [r.node_id, r]));
  const out: TreeRecord[] = [];
  for (let r = byId.get(leaf); r; r = r.parent === null ? undefined : byId.get(r.parent)) out.unshift(r);
  return out;
}

function assertExact(all: TreeRecord[], sample: LeafSample) {
  const want = expected(pathOf(all, sample.leaf));
  assert.equal(sample.tokens, want.tokens, `leaf ${sample.leaf} tokens`);
  assert.equal(sample.loss_mask, want.mask, `leaf ${sample.leaf} loss mask`);
  assert.equal(sample.rollout_log_probs, want.logprobs, `leaf ${sample.leaf} logprobs`);
}

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: qwen3() });
  core = coreFor({ engineUrl: engine.url, tokenizerFolder: folder });
});
test.after(async () => {
  await core.close();
  await engine.close();
});

const SYS: WireMessage = { role: "system", content: "You are terse." };
const user = (text: string): WireMessage => ({ role: "user", content: text });

test("a retried turn keeps both attempts; drop_retries exports only the later one", async () => {
  const id = await create(core);
  const a1 = await turn(core, id, [SYS, user("one")]);
  const history = [SYS, user("one"), a1, user("two")];
  await turn(core, id, history);
  await turn(core, id, history); // the harness retries the same turn
  const all = await records(core, id);
  assert.equal(
    all.map((r) => [r.node_id, r.parent, r.retry_of]),
    [
      ["n0", null, null],
      ["n1", "n0", null],
      ["n2", "n0", "n1"],
    ],
  );
  const both = await samples(core, id, {});
  assert.equal(
    both.map((s) => s.leaf),
    ["n1", "n2"],
  );
  for (const s of both) assertExact(all, s);
  const later = await samples(core, id, { drop_retries: true });
  assert.equal(
    later.map((s) => s.leaf),
    ["n2"],
  );
  assert.equal(later[0], both[1]);
  assert.equal(
    (await samples(core, id, { leaves: "latest" })).map((s) => s.leaf),
    ["n2"],
  );
  await core.delete(id);
});

test("a rewritten earlier message makes a branch, not a rollback error", async () => {
  const history: WireMessage[] = [SYS, user("q1")];
  const linear = await create(core, {});
  const id = await create(core);
  for (const sid of [linear, id]) {
    const h = [...history];
    for (let k = 2; k <= 3; k++) h.push(await turn(core, sid, h), user(`q${k}`));
    await turn(core, sid, h);
  }
  const rewritten = [SYS, user("q1, said otherwise")];
  // Linear mode refuses what would discard three turns; tree mode keeps them and branches.
  const refused = await core.chat(linear, req({ model: "m", messages: rewritten }));
  assert.is(refused.status, 400);
  assert.is((await json(refused)).code, "TITO_ERR_ROLLBACK");
  await turn(core, id, rewritten);
  const all = await records(core, id);
  assert.is(all.length, 4);
  assert.equal(all[3]!.parent, null);
  const tree = await json(await core.tree(id));
  assert.equal(
    tree.nodes.map((n: { node: string; parent: string | null }) => [n.node, n.parent]),
    [
      ["n0", null],
      ["n1", "n0"],
      ["n2", "n1"],
      ["n3", null],
    ],
  );
  assert.is(tree.current, "n3");
  // The old branch still takes turns: its history attaches to n2.
  const old = [...history];
  for (let i = 0; i < 3; i++) old.push(all[i]!.response.choices[0].message as WireMessage, user(`q${i + 2}`));
  old.pop();
  old.push(user("q4"));
  await turn(core, id, old);
  assert.is((await records(core, id))[4]!.parent, "n2");
  await core.delete(id);
  await core.delete(linear);
});

test("3 branches from turn 5, 2 turns each: exact samples, a packed sample with the prefix once", async () => {
  const id = await create(core);
  const h: WireMessage[] = [SYS, user("t1")];
  for (let k = 2; k <= 5; k++) h.push(await turn(core, id, h), user(`t${k}`));
  const fifth = await turn(core, id, h); // n4: turn 5
  for (const b of ["a", "b", "c"]) {
    const branch = [...h, fifth, user(`branch ${b}`)];
    branch.push(await turn(core, id, branch), user(`more ${b}`));
    await turn(core, id, branch);
  }
  const all = await records(core, id);
  assert.is(all.length, 11);
  const list = await samples(core, id, { leaves: "all" });
  assert.equal(
    list.map((s) => s.leaf),
    ["n6", "n8", "n10"],
  );
  for (const s of list) assertExact(all, s);
  const n4 = all[4]!;
  const prefix = n4.request.input_ids.length + n4.response.choices[0].meta_info.output_token_logprobs.length;
  for (const s of list) assert.equal(s.tokens.slice(0, prefix), list[0]!.tokens.slice(0, prefix));
  const r = await core.samples(id, req({ packed: true }));
  assert.is(r.status, 200);
  const packed = await json(r);
  assert.equal(packed.leaves, ["n6", "n8", "n10"]);
  // Shared: the first five turns and whatever of the next prompts is equal too.
  let shared = 0;
  while (list.every((s) => s.tokens[shared] === list[0]!.tokens[shared])) shared++;
  assert.ok(shared >= prefix);
  assert.is(packed.tokens.length, shared + list.reduce((n, s) => n + s.tokens.length - shared, 0));
  assert.equal(packed.tokens.slice(0, shared), list[0]!.tokens.slice(0, shared));
  assert.equal(packed.leaf_count.slice(0, shared), new Array(shared).fill(3));
  assert.ok(packed.leaf_count.slice(shared).every((n: number) => n === 1));
  for (const name of ["parent", "leaf_count", "loss_mask", "rollout_log_probs"])
    assert.is(packed[name].length, packed.tokens.length, name);
  // Each leaf's path, walked up from its end through `parent`, is its sample again.
  list.forEach((s, i) => {
    const tokens: number[] = [];
    const mask: number[] = [];
    for (let k = packed.leaf_ends[i]; k !== -1; k = packed.parent[k]) {
      tokens.unshift(packed.tokens[k]);
      mask.unshift(packed.loss_mask[k]);
    }
    assert.equal(tokens, s.tokens);
    assert.equal(mask.slice(tokens.length - s.response_length), s.loss_mask);
  });
  // The same packed arrays as safetensors.
  const st = await core.samples(id, req({ packed: true }, "format=safetensors"));
  const file = readSafetensors(Buffer.concat(st.body as Buffer[]));
  assert.equal(file.tensors.tokens!.values, packed.tokens);
  assert.equal(file.tensors.leaf_count!.values, packed.leaf_count);
  assert.equal(file.tensors.parent!.values, packed.parent);
  assert.equal(file.tensors.loss_mask!.values, packed.loss_mask);
  // And the per-leaf list as safetensors: one set of tensors per leaf.
  const listed = readSafetensors(
    Buffer.concat((await core.samples(id, req({}, "format=safetensors"))).body as Buffer[]),
  );
  assert.equal(JSON.parse(listed.metadata.leaves!), ["n6", "n8", "n10"]);
  assert.equal(listed.tensors["n8.tokens"]!.values, list[1]!.tokens);
  assert.equal(listed.tensors["n8.loss_mask"]!.values, list[1]!.loss_mask);
  await core.delete(id);
});

test("extending a node cut by length is a 409 naming it; retrying it is not", async () => {
  const id = await create(core);
  const cut = await turn(core, id, [SYS, user("long")], { max_tokens: 1 });
  assert.is((await records(core, id))[0]!.finish_reason, "length");
  const r = await core.chat(id, req({ model: "m", messages: [SYS, user("long"), cut, user("go on")] }));
  assert.is(r.status, 409);
  const body = await json(r);
  assert.is(body.code, "TITO_ERR_NODE_CUT");
  assert.match(body.error, /node n0/);
  await turn(core, id, [SYS, user("long")]);
  assert.is((await records(core, id))[1]!.retry_of, "n0");
  await core.delete(id);
});

test("the node cap is a 409 with its code", async () => {
  const capped = coreFor({ engineUrl: engine.url, tokenizerFolder: folder, trajectory: { maxNodes: 2 } });
  const id = await create(capped);
  await turn(capped, id, [SYS, user("a")]);
  await turn(capped, id, [SYS, user("b")]);
  const r = await capped.chat(id, req({ model: "m", messages: [SYS, user("c")] }));
  assert.is(r.status, 409);
  assert.is((await json(r)).code, "TITO_ERR_TRAJECTORY_NODES");
  assert.is((await records(capped, id)).length, 2);
  await capped.close();
});

test("--trajectory tree is the default a create body overrides; a bad mode is a 400", async () => {
  const treeCore = coreFor({ engineUrl: engine.url, tokenizerFolder: folder, trajectory: { mode: "tree" } });
  const byDefault = await create(treeCore, {});
  const linear = await create(treeCore, { trajectory: "linear" });
  await turn(treeCore, byDefault, [SYS, user("x")]);
  await turn(treeCore, linear, [SYS, user("x")]);
  assert.is((await records(treeCore, byDefault))[0]!.node_id, "n0");
  assert.is((await records(treeCore, linear))[0]!.node_id, undefined);
  const bad = await treeCore.create(undefined, Buffer.from('{"trajectory":"forest"}'));
  assert.is(bad.status, 400);
  assert.is((await json(bad)).code, "TITO_ERR_INVALID_TRAJECTORY");
  // A linear session refuses the tree keys of a samples request.
  const refused = await treeCore.samples(linear, req({ leaves: "all" }));
  assert.is(refused.status, 400);
  assert.is((await json(refused)).code, "TITO_ERR_INVALID_SAMPLE_REQUEST");
  await treeCore.close();
});

test("a journal replays the same tree, records and samples byte for byte", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tito-tree-"));
  try {
    const open = async () => {
      const store = await JournalRecordStore.open({ dir, fsync: "every" });
      return coreFor({ engineUrl: engine.url, tokenizerFolder: folder, recordStore: store });
    };
    const first = await open();
    await first.recover();
    const id = await create(first);
    const a1 = await turn(first, id, [SYS, user("r1")]);
    await turn(first, id, [SYS, user("r1"), a1, user("r2")]);
    await turn(first, id, [SYS, user("r1"), a1, user("r2")]);
    await turn(first, id, [SYS, user("r1, again")]);
    const views = async (c: SessionCore) => [
      await responseText(await c.get(id)),
      await responseText(await c.tree(id)),
      await responseText(await c.samples(id, req({}))),
      await responseText(await c.samples(id, req({ packed: true }))),
    ];
    const before = await views(first);
    await first.close();
    const second = await open();
    assert.equal(await second.recover(), { sessions: 1, turns: 4 });
    assert.equal(await views(second), before);
    // The replayed tree takes turns where it left off.
    await turn(second, id, [SYS, user("r1"), a1, user("r2, the third try")]);
    assert.equal((await records(second, id))[4]!.parent, "n0");
    await second.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
