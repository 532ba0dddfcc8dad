// Tree-mode sessions with real processes (docs/trajectories.md): over HTTP a retry and a
// rewritten history become nodes (GET /sessions/{id}/tree, the metrics count them); kill -9
// of every worker replays each tree, its records and its samples byte for byte and the
// tree takes turns again where it left off; a restart with another worker count (a
// re-shard) keeps them; deleting a session deletes its whole tree.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { killAndAwaitRestart } from "../helpers/events.ts";
import { call, chat } from "../helpers/server.ts";

let engine: SimEngine;
const dataDir = mkdtempSync(join(tmpdir(), "tito-tree-durability-"));

test.before(async () => {
  engine = await startSimEngine();
});
test.after(async () => {
  await engine?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const start = (workers: number) =>
  startSessionServer({
    ...{ engineUrl: engine.url, workers, dataDir, logLevel: "warn", trajectory: "tree" },
    ...{ restartBackoffMs: 50, maxRestarts: 10 },
  });

const SYS = { role: "system", content: "You are terse." };
const user = (content: string) => ({ role: "user", content });
const IDS = ["tree-a", "tree-b", "tree-c", "tree-d"];

/** Every view of a session that must come back the same: records, outline, samples, packed sample. */
async function views(base: string, id: string): Promise<string[]> {
  return [
    (await call(base, "GET", `/sessions/${id}`)).text,
    (await call(base, "GET", `/sessions/${id}/tree`)).text,
    (await call(base, "POST", `/sessions/${id}/samples`, {})).text,
    (await call(base, "POST", `/sessions/${id}/samples`, { packed: true, drop_retries: true })).text,
  ];
}

async function turn(base: string, id: string, messages: unknown[]) {
  const { res, message } = await chat(base, id, messages);
  assert.is(res.status, 200, res.text);
  return { role: "assistant", content: message!.content };
}

test("kill -9 replays every tree byte for byte; a re-shard keeps them; delete takes the whole tree", async () => {
  let server = await start(2);
  const histories = new Map<string, unknown[]>();
  for (const id of IDS) {
    // PUT without a body: the server's --trajectory tree applies.
    assert.is((await call(server.url, "PUT", `/sessions/${id}`)).status, 201);
    const a1 = await turn(server.url, id, [SYS, user(`${id} one`)]);
    const h = [SYS, user(`${id} one`), a1, user("two")];
    await turn(server.url, id, h);
    await turn(server.url, id, h); // a retry: n2, retry_of n1
    await turn(server.url, id, [SYS, user(`${id} one, rewritten`)]); // a new root: n3
    histories.set(id, h);
  }
  const outline = (
    await call<{ nodes: { node: string; parent: string | null; retry_of: string | null }[] }>(
      server.url,
      "GET",
      `/sessions/${IDS[0]}/tree`,
    )
  ).json;
  assert.equal(
    outline.nodes.map((n) => [n.node, n.parent, n.retry_of]),
    [
      ["n0", null, null],
      ["n1", "n0", null],
      ["n2", "n0", "n1"],
      ["n3", null, null],
    ],
  );
  const metrics = (await call(server.url, "GET", "/metrics")).text;
  // Summed over the shards' series.
  const value = (name: string) =>
    metrics
      .split("\n")
      .filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
  assert.is(value("tito_trajectory_nodes_total"), 4 * IDS.length);
  assert.is(value("tito_trajectory_retries_total"), IDS.length);
  assert.is(value("tito_trajectory_branches_total"), 2 * IDS.length);

  const before = new Map<string, string[]>();
  for (const id of IDS) before.set(id, await views(server.url, id));
  for (const shard of [0, 1]) await killAndAwaitRestart(server, shard);
  for (const id of IDS) assert.equal(await views(server.url, id), before.get(id), `${id} after kill -9`);

  // The replayed tree takes turns where it left off: a third attempt of turn 2 retries n2.
  const h = histories.get(IDS[1]!)!;
  await turn(server.url, IDS[1]!, h);
  const records = (
    await call<{ records: { node_id: string; parent: string; retry_of: string }[] }>(
      server.url,
      "GET",
      `/sessions/${IDS[1]}`,
    )
  ).json.records;
  assert.equal(records.at(-1), { ...records.at(-1)!, node_id: "n4", parent: "n0", retry_of: "n2" });
  before.set(IDS[1]!, await views(server.url, IDS[1]!));
  await server.shutdown();

  // Another worker count: the journal is re-sharded and every tree comes back.
  server = await start(3);
  try {
    for (const id of IDS) assert.equal(await views(server.url, id), before.get(id), `${id} after a re-shard`);
    assert.is((await call(server.url, "DELETE", `/sessions/${IDS[0]}`)).status, 204);
    assert.is((await call(server.url, "GET", `/sessions/${IDS[0]}/tree`)).status, 404);
  } finally {
    await server.shutdown();
  }
});

test.run();
