// Forks across a re-shard (issue 43; docs/http.md, "Forking a session"), with real processes,
// a journal and a recording proxy in front of the simulated engine: a fork keeps everything
// its session had when the server comes back with another worker count, whether the
// re-shard copies its FORK entry beside its parent's or writes it out whole in another
// shard (sessions/journal/reshard-forks.ts), and after a kill -9 of the worker that then
// replays it. Checked for a linear fork, a fork of that fork and a tree-mode fork at a node:
// its routing key (its root session's id, in the engine request's X-SMG-Routing-Key), its
// budget (given at its root's create: `max_turns` refuses one turn more with
// TITO_ERR_BUDGET, `max_total_tokens` caps the engine request's max_tokens), its mode (a
// tree-mode fork's retry is a sibling node) and its records, byte for byte.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { killAndAwaitRestart } from "../helpers/events.ts";
import { startRecorder, type Upstream } from "../helpers/recording-proxy.ts";
import { call, chat } from "../helpers/server.ts";

const BUDGET = { max_total_tokens: 5000, max_turns: 3 };
let engine: SimEngine;
let proxy: Server;
const upstream: Upstream[] = [];
const root = mkdtempSync(join(tmpdir(), "tito-fork-reshard-test-"));
const dataDir = join(root, "data");
let server: SessionServer;
let base: string;

async function start(workers: number): Promise<void> {
  const address = proxy.address() as { port: number };
  server = await startSessionServer({
    ...{ engineUrl: `http://127.0.0.1:${address.port}`, workers, dataDir, logLevel: "warn" },
    ...{ allowedAppendRoles: ["user"], restartBackoffMs: 50 },
  });
  base = server.url;
}

test.before(async () => {
  engine = await startSimEngine();
  proxy = await startRecorder(engine.url, upstream);
  await start(2);
});
test.after(async () => {
  await server?.shutdown();
  await new Promise((resolve) => proxy?.close(resolve));
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

const user = (content: string) => ({ role: "user", content });

async function turn(id: string, messages: unknown[]): Promise<unknown> {
  const { res, message } = await chat(base, id, messages);
  assert.is(res.status, 200, res.text);
  return message;
}

/** An id on `shard` with 2 workers that with 3 goes apart from every one of `others` (or with `together`). */
function idOn(tag: string, shard: number, others: string[], together?: string): string {
  for (let i = 0; ; i++) {
    const id = `${tag}-${i}`;
    if (shardOf(id, 2) !== shard) continue;
    if (
      together !== undefined
        ? shardOf(id, 3) === shardOf(together, 3)
        : others.every((o) => shardOf(id, 3) !== shardOf(o, 3))
    )
      return id;
  }
}

interface Fork {
  id: string;
  /** Its root session: the routing key its engine requests carry. */
  root: string;
  /** The history of its last turn, and that turn's reply (a turn past it is one too many). */
  last: unknown[];
  reply: unknown;
  tree: boolean;
}
const forks: Fork[] = [];

/** Every view of a session that must come back the same after a replay or a re-shard. */
async function views(id: string): Promise<string[]> {
  const tree = (await call(base, "GET", `/sessions/${id}/tree`)).text;
  return [
    (await call(base, "GET", `/sessions/${id}`)).text,
    tree,
    (await call(base, "POST", `/sessions/${id}/samples`, {})).text,
  ];
}

/**
 * What a fork must still have: one turn past its last is refused by `max_turns`; its last
 * turn again (a rollback of one, or a sibling node) goes to the engine under its root's
 * routing key, its max_tokens capped by `max_total_tokens`, and a tree-mode fork makes it a
 * retry node.
 */
async function holds(f: Fork, when: string): Promise<void> {
  const over = await chat<{ code: string; error: string }>(base, f.id, [...f.last, f.reply, user("one too many")]);
  assert.equal(
    [over.res.status, over.res.json.code],
    [400, "TITO_ERR_BUDGET"],
    `${f.id} ${when}: max_turns kept (${over.res.text})`,
  );
  const sent = upstream.length;
  f.reply = await turn(f.id, f.last);
  const generate = upstream.slice(sent).filter((u) => u.body.includes('"input_ids"'));
  assert.is(generate.length, 1, `${f.id} ${when}: one engine request`);
  const request = JSON.parse(generate[0]!.body) as { input_ids: number[]; max_tokens: number };
  assert.is(generate[0]!.headers["x-smg-routing-key"], f.root, `${f.id} ${when}: its root's routing key`);
  assert.is(
    request.max_tokens,
    BUDGET.max_total_tokens - request.input_ids.length,
    `${f.id} ${when}: max_total_tokens kept`,
  );
  if (!f.tree) return;
  const nodes = (
    await call<{ trajectory: string; nodes: { node: string; retry_of: string | null }[] }>(
      base,
      "GET",
      `/sessions/${f.id}/tree`,
    )
  ).json;
  assert.is(nodes.trajectory, "tree", `${f.id} ${when}: still a tree`);
  const [retried, retry] = nodes.nodes.slice(-2);
  assert.is(retry!.retry_of, retried!.node, `${f.id} ${when}: its last turn again is a retry node`);
}

test("forks of a linear and a tree-mode session, with a budget: routing key and budget hold before any re-shard", async () => {
  // Linear: three turns (max_turns), a fork at the last, a fork of that fork.
  const parent = "fork-reshard-linear";
  assert.is((await call(base, "PUT", `/sessions/${parent}`, BUDGET)).status, 201);
  const h: unknown[] = [user("one")];
  for (const next of ["two", "three"]) h.push(await turn(parent, h), user(next));
  const reply = await turn(parent, h);
  const shard = shardOf(parent, 2);
  const apart = idOn("fork-apart", shard, [parent]);
  const beside = idOn("fork-beside", shard, [], parent);
  const grand = idOn("fork-of-fork", shard, [parent, apart]);
  assert.is((await call(base, "POST", `/sessions/${parent}/fork`, { at: 2, session_id: apart })).status, 201);
  assert.is((await call(base, "POST", `/sessions/${parent}/fork`, { at: 2, session_id: beside })).status, 201);
  assert.is((await call(base, "POST", `/sessions/${apart}/fork`, { at: 2, session_id: grand })).status, 201);
  for (const id of [apart, beside, grand]) forks.push({ id, root: parent, last: h, reply, tree: false });
  // Tree mode: n0, n1 under it (max_turns 2 along a path), a fork at n1.
  const treeParent = "fork-reshard-tree";
  const treeBudget = { ...BUDGET, max_turns: 2, trajectory: "tree" };
  assert.is((await call(base, "PUT", `/sessions/${treeParent}`, treeBudget)).status, 201);
  const t = [user("one"), await turn(treeParent, [user("one")]), user("two")];
  const treeReply = await turn(treeParent, t);
  const treeFork = idOn("tree-fork-apart", shardOf(treeParent, 2), [treeParent]);
  assert.is((await call(base, "POST", `/sessions/${treeParent}/fork`, { at: "n1", session_id: treeFork })).status, 201);
  forks.push({ id: treeFork, root: treeParent, last: t, reply: treeReply, tree: true });
  for (const f of forks) await holds(f, "before the re-shard");
});

test("another worker count, then kill -9 of each worker: every fork keeps its routing key, budget and records", async () => {
  const before = new Map<string, string[]>();
  for (const f of forks) before.set(f.id, await views(f.id));
  await server.shutdown();
  await start(3);
  const placed = new Set(forks.map((f) => shardOf(f.id, 3) === shardOf(f.root, 3)));
  assert.equal(placed, new Set([true, false]), "copied beside the parent and written out whole, both");
  for (const f of forks) assert.equal(await views(f.id), before.get(f.id), `${f.id} after the re-shard`);
  for (const f of forks) await holds(f, "after the re-shard");
  for (const f of forks) before.set(f.id, await views(f.id));
  for (const shard of new Set(forks.map((f) => shardOf(f.id, 3)))) await killAndAwaitRestart(server, shard);
  for (const f of forks) assert.equal(await views(f.id), before.get(f.id), `${f.id} after kill -9`);
  for (const f of forks) await holds(f, "after the re-shard and kill -9");
});

test.run();
