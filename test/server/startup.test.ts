// Starting and stopping the tree through the embedding API: a worker's configuration error
// fails the start at once with its coded error (no restart) and leaves no process behind; the events iterable and listener
// see the same ordered log; shutdown is idempotent and shared.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import {
  ChildInitError,
  InvalidOptionError,
  startSessionServer,
  type SessionServerOptions,
  type SupervisionEvent,
} from "../../index.ts";
import { closestName, editDistance } from "../../server/host/closest-name.ts";
import { ROUTER_NODE_FLAGS, WORKER_NODE_FLAGS } from "../../server/host/session-server.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { waitGone } from "../helpers/events.ts";
import { npmTokenizerDir } from "../sessions/fixtures.ts";

let engine: SimEngine;
test.before(async () => {
  engine = await startSimEngine();
});
test.after(async () => {
  await engine?.close();
});

test("a worker with a configuration error is not restarted: the start rejects at once with its coded error", async () => {
  const events: SupervisionEvent[] = [];
  try {
    // The gemma3 family appends only user messages (docs/models.md): the session core
    // refuses "tool" (TITO_ERR_CONFIG) before the worker is ever ready.
    await startSessionServer({
      engineUrl: engine.url,
      workers: 2,
      tokenizerDir: npmTokenizerDir("gemma3"),
      allowedAppendRoles: ["tool", "user"],
      maxRestarts: 3,
      logLevel: "silent",
      onEvent: (e) => events.push(e),
    });
    assert.unreachable("the start must fail");
  } catch (err) {
    assert.instance(err, ChildInitError);
    assert.is((err as ChildInitError).code, "TITO_ERR_CONFIG");
    assert.match(
      (err as Error).message,
      /^shard-\d could not start: allowed append role "tool" is not one the gemma3 family can append/,
    );
  }
  assert.equal(
    events.filter((e) => e.kind === "restarting" || e.kind === "restarted"),
    [],
    "no worker was restarted",
  );
  const spawned = events.filter((e) => e.kind === "spawned" && e.actor.startsWith("shard-"));
  assert.ok(spawned.length >= 1 && spawned.length <= 2, "each shard started once at most");
  assert.ok(events.some((e) => e.kind === "escalated" && /not restarted/.test(String(e.detail.reason))));
  assert.equal(
    await waitGone(
      events.filter((e) => e.kind === "spawned").map((e) => e.pid!),
      5_000,
    ),
    [],
  );
});

test("a tokenizer folder that is not there is refused by the host before anything is spawned", async () => {
  const events: SupervisionEvent[] = [];
  for (const tokenizerDir of ["/nonexistent-tokenizer", dirname(npmTokenizerDir("gemma3"))]) {
    try {
      await startSessionServer({
        engineUrl: engine.url,
        tokenizerDir,
        logLevel: "silent",
        onEvent: (e) => events.push(e),
      });
      assert.unreachable("the start must fail");
    } catch (err) {
      assert.instance(err, InvalidOptionError);
      assert.match((err as Error).message, /^tokenizerDir /);
    }
  }
  assert.equal(events, [], "no tree was started");
});

test("bad options are refused before anything starts", async () => {
  await startSessionServer({ workers: 0 }).then(
    () => assert.unreachable("workers: 0 must be refused"),
    (err: Error) => assert.match(err.message, /workers must be an integer between 1/),
  );
  await startSessionServer({ engineUrl: "ftp://x" }).then(
    () => assert.unreachable("a non-http engine must be refused"),
    (err: Error) => assert.match(err.message, /engineUrl must be an http\(s\) URL/),
  );
});

test("an unknown option is an error naming it and the closest known option; nothing starts", async () => {
  const exitHooks = process.listenerCount("exit");
  const typos: Array<[Record<string, unknown>, string, string]> = [
    [{ engineURL: engine.url }, "engineURL", "engineUrl"],
    [{ engineUrl: engine.url, worker: 2 }, "worker", "workers"],
    [{ engineUrl: engine.url, data_dir: "/tmp/x" }, "data_dir", "dataDir"],
    [{ engineUrl: engine.url, maxRestart: 1 }, "maxRestart", "maxRestarts"],
    [{ engineUrl: engine.url, routing_replay: true }, "routing_replay", "routingReplay"],
  ];
  for (const [options, typo, meant] of typos) {
    const err = await startSessionServer(options as SessionServerOptions).then(
      () => assert.unreachable(`${typo} must be refused`),
      (e: unknown) => e,
    );
    assert.instance(err, InvalidOptionError);
    assert.is(
      (err as Error).message,
      `unknown option "${typo}": did you mean "${meant}"? (docs/embedding.md lists every option)`,
    );
  }
  assert.is(process.listenerCount("exit"), exitHooks, "no tree, engine or lock was started");
});

test("editDistance and closestName", () => {
  assert.is(editDistance("kitten", "sitting"), 3);
  assert.is(editDistance("", "abc"), 3);
  assert.is(editDistance("same", "same"), 0);
  assert.is(closestName("engineURL", ["engineApi", "engineUrl", "engineTimeoutMs"]), "engineUrl");
  assert.is(closestName("lgoLevel", ["logLevel", "host"]), "logLevel");
});

test("events: the async iterable replays from the start, matches on('event'), and ends at shutdown", async () => {
  const exitHooks = process.listenerCount("exit");
  const server = await startSessionServer({ engineUrl: engine.url, workers: 1, logLevel: "warn" });
  assert.is(
    process.listenerCount("exit"),
    exitHooks + 1,
    "one exit hook guards the children, then the data directory (its lock), while running",
  );
  const live: SupervisionEvent[] = [];
  server.on("event", (e) => live.push(e));
  const iterated: SupervisionEvent[] = [];
  const reading = (async () => {
    for await (const event of server.events) iterated.push(event);
  })();
  const pids = [server.tree().router.pid!, server.tree().shards[0].pid!];
  // Each process runs with its own heap flags (session-server.ts says why each is there).
  const argv = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  for (const [pid, flags] of [
    [pids[0]!, ROUTER_NODE_FLAGS],
    [pids[1]!, WORKER_NODE_FLAGS],
  ] as const)
    for (const flag of flags)
      assert.ok(argv(pid).includes(flag), `pid ${pid} runs with ${flag}: ${argv(pid).join(" ")}`);
  assert.ok(ROUTER_NODE_FLAGS.includes("--min-semi-space-size=16"));
  const [a, b] = [server.shutdown(), server.shutdown()];
  await Promise.all([a, b]);
  await reading; // ends by itself once the server has shut down
  assert.equal(
    iterated.map((e) => e.seq),
    iterated.map((_, i) => i + 1),
    "every event, in order, from seq 1",
  );
  assert.ok(iterated.some((e) => e.actor === "router" && e.kind === "ready"));
  assert.equal(iterated.at(-1)!.kind, "stopped");
  assert.equal(live, iterated.slice(iterated.length - live.length), "the listener saw the same tail");
  assert.throws(() => server.check(), /shut down/);
  assert.is(process.listenerCount("exit"), exitHooks, "the exit hooks are removed after shutdown");
  assert.equal(await waitGone(pids, 5_000), []);
});

test.run();
