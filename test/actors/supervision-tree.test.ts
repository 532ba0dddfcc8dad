// The supervision tree with fixture children (no tokenizer): restart sequences,
// intensity, escalation, startup crashes, shutdown during backoff, no orphans.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SessionServerFailedError, SupervisionTree, type SupervisionEvent } from "../../actors/index.ts";
import { childNodeFlags } from "../../actors/child-process.ts";
import { alive, waitForEvent, waitGone } from "../helpers/events.ts";
import { TS_LOADER_URL } from "../helpers/ts-loader.ts";

const entry = fileURLToPath(new URL("../fixtures/child-echo.ts", import.meta.url));
/** The fixture runs through the test run's own TypeScript loader, not tsx's (~0.15 CPU s less per start). */
const tsLoader = TS_LOADER_URL;
const trees: SupervisionTree[] = [];

function makeTree(
  opts: { shards?: number; maxRestarts?: number; crashShardAtStart?: number; baseBackoffMs?: number } = {},
) {
  const tree = new SupervisionTree({
    instanceId: "0".repeat(32),
    router: { name: "router", entry, tsLoader, config: {} },
    shards: Array.from({ length: opts.shards ?? 2 }, (_, i) => ({
      name: `shard-${i}`,
      entry,
      tsLoader,
      config: i === 0 && opts.crashShardAtStart !== undefined ? { crashAtStart: opts.crashShardAtStart } : {},
    })),
    restart: { maxRestarts: opts.maxRestarts ?? 3, baseBackoffMs: opts.baseBackoffMs ?? 50, maxBackoffMs: 200 },
    graceMs: 2_000,
  });
  trees.push(tree);
  return tree;
}

const kinds = (events: SupervisionEvent[], actor: string) => events.filter((e) => e.actor === actor).map((e) => e.kind);
const allPids = (tree: SupervisionTree) => [tree.tree().router.pid!, ...tree.tree().shards.map((s) => s.pid!)];

test.after(async () => {
  await Promise.all(trees.map((t) => t.shutdown()));
});

test("a killed child restarts: exited -> restarting -> spawned -> ready -> restarted", async () => {
  const tree = makeTree();
  await tree.whenRunning();
  const before = tree.tree().shards[1].pid!;
  const since = tree.ring.lastSeq;
  process.kill(before, "SIGKILL");
  await waitForEvent(
    tree,
    () => tree.events(since),
    (e) => e.actor === "shard-1" && e.kind === "restarted",
  );
  const events = tree.events(since).filter((e) => e.actor === "shard-1");
  assert.equal(kinds(events, "shard-1"), ["exited", "restarting", "spawned", "ready", "restarted"]);
  assert.equal(events[0].detail, { code: null, signal: "SIGKILL" });
  assert.is(events[0].pid, before);
  assert.is(events[1].detail.attempt, 1);
  const after = tree.tree().shards[1];
  assert.is.not(after.pid, before);
  assert.is(after.restarts, 1);
  assert.is(after.state, "running");
  assert.is(tree.tree().state, "running");
  const seqs = tree.events().map((e) => e.seq);
  assert.equal(
    seqs,
    [...seqs].sort((a, b) => a - b),
    "events are in order",
  );
  await tree.shutdown();
  assert.equal(await waitGone(allPids(tree), 5_000), []);
});

test("children start with the Node/V8 flags (single-threaded GC unless TITO_CHILD_NODE_FLAGS says otherwise)", async () => {
  assert.equal(childNodeFlags({}), ["--single-threaded-gc"]);
  assert.equal(childNodeFlags({ TITO_CHILD_NODE_FLAGS: " --max-old-space-size=4096  --no-opt " }), [
    "--max-old-space-size=4096",
    "--no-opt",
  ]);
  assert.equal(childNodeFlags({ TITO_CHILD_NODE_FLAGS: "" }), []);
  const tree = makeTree({ shards: 1 });
  await tree.whenRunning();
  for (const pid of allPids(tree)) {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    for (const flag of childNodeFlags())
      assert.ok(argv.includes(flag), `pid ${pid} runs with ${flag}: ${argv.join(" ")}`);
  }
  await tree.shutdown();
});

test("over the restart intensity the tree escalates, stops every child and check() throws", async () => {
  const tree = makeTree({ maxRestarts: 1 });
  await tree.whenRunning();
  const pids = allPids(tree);
  process.kill(tree.tree().shards[0].pid!, "SIGKILL");
  await waitForEvent(
    tree,
    () => tree.events(),
    (e) => e.actor === "shard-0" && e.kind === "restarted",
  );
  pids.push(tree.tree().shards[0].pid!);
  process.kill(tree.tree().shards[0].pid!, "SIGKILL");
  const escalated = await waitForEvent(
    tree,
    () => tree.events(),
    (e) => e.kind === "escalated",
  );
  assert.is(escalated.actor, "shard-0");
  assert.match(String(escalated.detail.reason), /more than 1 restart/);
  await waitForEvent(
    tree,
    () => tree.events(),
    (e) => e.actor === "supervisor" && e.kind === "stopped",
  );
  const order = tree.events().map((e) => `${e.actor}:${e.kind}`);
  assert.ok(order.indexOf("shard-0:escalated") < order.indexOf("supervisor:stopped"), order.join(" "));
  assert.throws(
    () => tree.check(),
    (e: unknown) => e instanceof SessionServerFailedError && /shard-0/.test((e as Error).message),
  );
  assert.is(tree.tree().state, "failed");
  assert.equal(await waitGone(pids, 5_000), [], "no child left");
});

test("maxRestarts 0 fails fast on the first death", async () => {
  const tree = makeTree({ maxRestarts: 0 });
  await tree.whenRunning();
  process.kill(tree.tree().router.pid!, "SIGKILL");
  const failure = await tree.whenFailed();
  assert.match(failure, /router/);
  assert.not.ok(tree.events().some((e) => e.kind === "restarting"));
});

test("a child that crashes at every start escalates instead of looping; the host stays responsive", async () => {
  let ticks = 0;
  const ticker = setInterval(() => ticks++, 5);
  const tree = makeTree({ crashShardAtStart: 7, maxRestarts: 2 });
  try {
    await tree.whenRunning();
    assert.unreachable("start should fail");
  } catch (err) {
    assert.instance(err, SessionServerFailedError);
    assert.match((err as Error).message, /exit code 7/);
  } finally {
    clearInterval(ticker);
  }
  assert.equal(kinds(tree.events(), "shard-0").filter((k) => k === "exited").length, 3, "initial start + 2 restarts");
  assert.ok(ticks > 0, "timers kept firing while the child crash-looped");
  await waitForEvent(
    tree,
    () => tree.events(),
    (e) => e.actor === "supervisor" && e.kind === "stopped",
  );
  await tree.shutdown();
  assert.equal(
    await waitGone(
      tree
        .tree()
        .shards.map((s) => s.pid!)
        .concat(tree.tree().router.pid!),
      5_000,
    ),
    [],
  );
});

test("shutdown() while a restart backoff is pending leaves no process behind", async () => {
  const tree = makeTree({ baseBackoffMs: 5_000 });
  await tree.whenRunning();
  const pids = allPids(tree);
  process.kill(tree.tree().shards[1].pid!, "SIGKILL");
  await waitForEvent(
    tree,
    () => tree.events(),
    (e) => e.actor === "shard-1" && e.kind === "restarting",
  );
  const [a, b] = [tree.shutdown(), tree.shutdown()];
  assert.is(a, b, "concurrent callers share one teardown");
  await a;
  assert.equal(await waitGone(pids, 5_000), []);
  assert.not.ok(
    tree.events().some((e) => e.actor === "shard-1" && e.kind === "spawned" && e.seq > 3 && e.detail.epoch === 2),
  );
  assert.is(tree.tree().state, "stopped");
  assert.ok(pids.every((pid) => !alive(pid)));
});

test.run();
