// Reusing a --data-dir with another worker count, with real processes: the journal is
// re-sharded at startup (server/host/journal-layout.ts) and every session comes back byte
// for byte, through 1 → 2 → 3 → 1 workers; a data dir from before the layout record, with
// sessions in the wrong shards, finds them again; a host killed during the re-shard, or
// after its commit, loses nothing; and a journal that cannot be re-sharded refuses the
// start, naming both counts and the way out, and is left as it was.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  watch,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DataDirLayoutError, startSessionServer, type SessionServer } from "../../index.ts";
import { LAYOUT_FILE, prepareJournal } from "../../server/host/journal-layout.ts";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import { reshardJournal } from "../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { spawnCli, startCli } from "../helpers/cli.ts";
import { waitGone } from "../helpers/events.ts";
import { startTree } from "../helpers/tree.ts";
import { call, chat, newSession } from "../helpers/server.ts";
import { qwen3 } from "../sessions/fixtures.ts";

let engine: SimEngine;
let bigEngine: SimEngine;
const root = mkdtempSync(join(tmpdir(), "tito-reshard-test-"));

test.before(async () => {
  // One tokenizer load for both engines (a load is 1–2 CPU seconds).
  engine = await startSimEngine({ tokenizerFolder: qwen3() });
  // 6 MiB of routed_experts per reply: a journal whose copy takes a while to interrupt.
  bigEngine = await startSimEngine({
    tokenizerFolder: qwen3(),
    routedExpertsBytes: 6 * 1024 * 1024,
    alwaysRoutedExperts: true,
  });
});
test.after(async () => {
  await engine?.close();
  await bigEngine?.close();
  rmSync(root, { recursive: true, force: true });
});

async function withServer<T>(
  dataDir: string,
  workers: number,
  body: (server: SessionServer) => Promise<T>,
  engineUrl = engine.url,
): Promise<T> {
  const server = await startSessionServer({
    engineUrl,
    workers,
    dataDir,
    logLevel: "warn",
    allowedAppendRoles: ["user"],
  });
  try {
    return await body(server);
  } finally {
    await server.shutdown();
  }
}

/**
 * A journal to start from, written in this process: a one-worker in-process tree (the real
 * session core and journal store, test/helpers/tree.ts) on `dataDir`/shard-0, after the
 * count a one-worker start records (the host's own prepareJournal). What a one-worker
 * process tree leaves, without starting one where the start is not what the test is about.
 */
async function withJournal<T>(dataDir: string, body: (base: string) => Promise<T>, engineUrl = engine.url): Promise<T> {
  mkdirSync(dataDir, { recursive: true });
  // What the host does first on an empty --data-dir: record the count.
  await prepareJournal(dataDir, 1, () => Promise.reject(new Error("an empty data dir needs no re-shard")));
  assert.equal(layout(dataDir), { workers: 1 });
  const tree = await startTree({
    engineUrl,
    workers: 1,
    durability: "journal",
    dataDir,
    tokenizerFolder: qwen3(),
    allowedAppendRoles: ["user"],
  });
  let result: T;
  try {
    result = await body(tree.url);
  } finally {
    await tree.shutdown();
  }
  return result;
}

/** `count` sessions of `turns` user turns each; returns their message histories. */
async function populate(base: string, count: number, turns: number): Promise<Map<string, unknown[]>> {
  const histories = new Map<string, unknown[]>();
  for (let s = 0; s < count; s++) {
    const id = await newSession(base);
    const messages: unknown[] = [];
    for (let k = 0; k < turns; k++) {
      messages.push({ role: "user", content: `session ${s} question ${k}` });
      const { res, message } = await chat(base, id, messages);
      assert.is(res.status, 200, res.text);
      messages.push(message);
    }
    histories.set(id, messages);
  }
  return histories;
}

/** Every session's GET body, hashed (bodies may be large). */
async function bodies(base: string, ids: Iterable<string>): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const id of ids) {
    const res = await call(base, "GET", `/sessions/${id}`);
    assert.is(res.status, 200, `session ${id}: ${res.text.slice(0, 200)}`);
    out.set(id, createHash("sha256").update(res.text).digest("hex"));
  }
  return out;
}

const layout = (dataDir: string) => JSON.parse(readFileSync(join(dataDir, LAYOUT_FILE), "utf8"));
const entries = (dataDir: string) =>
  readdirSync(dataDir)
    .filter((n) => n !== "tito-server.lock")
    .sort();
const shardNames = (n: number) => Array.from({ length: n }, (_, i) => `shard-${i}`);

test("1 → 2 → 3 → 1 workers: every session byte for byte, deleted ones stay gone, turns continue", async () => {
  const dataDir = join(root, "counts");
  const { histories, before, deleted } = await withServer(dataDir, 1, async (server) => {
    const histories = await populate(server.url, 6, 2);
    const deleted = await newSession(server.url);
    assert.is((await call(server.url, "DELETE", `/sessions/${deleted}`)).status, 204);
    return { histories, before: await bodies(server.url, histories.keys()), deleted };
  });
  assert.equal(layout(dataDir), { workers: 1 }, "the count is recorded");
  for (const workers of [2, 3, 1]) {
    await withServer(dataDir, workers, async (server) => {
      assert.equal(await bodies(server.url, histories.keys()), before, `${workers} workers: the same bodies`);
      assert.is((await call(server.url, "GET", `/sessions/${deleted}`)).status, 404);
      const listed = await call<{ sessions: string[] }>(server.url, "GET", "/sessions?limit=100");
      assert.equal(listed.json.sessions, [...histories.keys()].sort());
      if (workers !== 1) return;
      for (const [id, messages] of histories) {
        const previous = JSON.parse((await call(server.url, "GET", `/sessions/${id}`)).text);
        const { res } = await chat(server.url, id, [...messages, { role: "user", content: "and then?" }]);
        assert.is(res.status, 200, res.text);
        const after = JSON.parse((await call(server.url, "GET", `/sessions/${id}`)).text);
        const ids: number[] = after.records.at(-1).request.input_ids;
        const accumulated: number[] = previous.metadata.accumulated_token_ids;
        assert.equal(ids.slice(0, accumulated.length), accumulated, `session ${id} continues from its exact tokens`);
      }
    });
    assert.equal(layout(dataDir), { workers });
    assert.equal(entries(dataDir), [...shardNames(workers), LAYOUT_FILE], "nothing else is left");
  }
});

test("a data dir from before the record, with sessions in the wrong shard (1 then 2 workers), finds them all", async () => {
  const dataDir = join(root, "legacy");
  const { ids, before } = await withJournal(dataDir, async (base) => {
    const ids = [...(await populate(base, 6, 1)).keys()];
    return { ids, before: await bodies(base, ids) };
  });
  // What a 2-worker start left before this change: an empty shard-1 and no record.
  rmSync(join(dataDir, LAYOUT_FILE));
  mkdirSync(join(dataDir, "shard-1"));
  await withServer(dataDir, 2, async (server) => {
    assert.equal(await bodies(server.url, ids), before);
  });
  assert.equal(layout(dataDir), { workers: 2 });
});

/** The pids of re-shard jobs working on `dataDir` (their config is in their environment). */
function reshardJobs(dataDir: string): number[] {
  const pids: number[] = [];
  for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (cmd.includes("reshard-main") && readFileSync(`/proc/${pid}/environ`, "utf8").includes(dataDir))
        pids.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

test("kill -9 of the host during the re-shard: the next start loses nothing", async () => {
  const dataDir = join(root, "killed");
  const { ids, before } = await withJournal(
    dataDir,
    async (base) => {
      const ids = [...(await populate(base, 4, 2)).keys()];
      return { ids, before: await bodies(base, ids) };
    },
    bigEngine.url,
  );
  const cli = spawnCli(["--port", "0", "--workers", "2", "--engine", bigEngine.url, "--data-dir", dataDir]);
  // The re-shard job makes reshard-2/ first thing: kill the host the moment it appears.
  await new Promise<void>((resolve, reject) => {
    const watcher = watch(dataDir, (_event, name) => {
      if (name !== "reshard-2") return;
      cli.proc.kill("SIGKILL");
      watcher.close();
      resolve();
    });
    const fail = (why: string) => {
      watcher.close();
      cli.proc.kill("SIGKILL");
      reject(new Error(`the CLI ${why} before a re-shard began: ${cli.stderr()}`));
    };
    void cli.exit.then(() => fail("exited"));
    cli.proc.stdout!.on("data", () => fail("was ready"));
  });
  assert.equal(await cli.exit, { code: null, signal: "SIGKILL" });
  assert.equal(await waitGone(reshardJobs(dataDir), 5_000), [], "the job dies with its host");
  for (const workers of [2, 1]) {
    const run = await startCli([
      "--port",
      "0",
      "--workers",
      String(workers),
      "--engine",
      bigEngine.url,
      "--data-dir",
      dataDir,
    ]);
    try {
      assert.equal(await bodies(run.url, ids), before, `${workers} workers after the crash: the same bodies`);
    } finally {
      run.proc.kill("SIGTERM");
      assert.is((await run.exit).code, 0);
    }
    assert.equal(entries(dataDir), [...shardNames(workers), LAYOUT_FILE]);
  }
});

test("a host that died after the commit: the next start finishes the switch, at any step", async () => {
  const oldDir = join(root, "commit-old");
  const newDir = join(root, "commit-new");
  const { ids, before } = await withJournal(oldDir, async (base) => {
    const ids = [...(await populate(base, 6, 2)).keys()];
    return { ids, before: await bodies(base, ids) };
  });
  cpSync(oldDir, newDir, { recursive: true });
  // The re-sharded layout, to build the states from: what a 2-worker start's re-shard job
  // (server/worker/reshard-main.ts) and commit leave, run here.
  await prepareJournal(newDir, 2, async (job) => void (await reshardJournal({ ...job, shardOf })));
  assert.equal(entries(newDir), [...shardNames(2), LAYOUT_FILE]);
  const pending = JSON.stringify({ workers: 2, pending: "reshard-2" });
  const states: Array<[string, (dir: string) => void]> = [
    [
      "committed, nothing moved",
      (dir) => {
        cpSync(join(oldDir, "shard-0"), join(dir, "shard-0"), { recursive: true });
        for (const s of shardNames(2)) cpSync(join(newDir, s), join(dir, "reshard-2", s), { recursive: true });
      },
    ],
    [
      "old shards removed, shard-0 moved in",
      (dir) => {
        cpSync(join(newDir, "shard-0"), join(dir, "shard-0"), { recursive: true });
        cpSync(join(newDir, "shard-1"), join(dir, "reshard-2", "shard-1"), { recursive: true });
      },
    ],
  ];
  // Each state once as it was left (2 workers), once with a further change of count.
  for (const [i, [name, build]] of states.entries())
    for (const workers of i === 0 ? [2, 1] : [2]) {
      const dir = join(root, `state-${name.replace(/\W+/g, "-")}-${workers}`);
      mkdirSync(dir);
      build(dir);
      writeFileSync(join(dir, LAYOUT_FILE), pending);
      await withServer(dir, workers, async (server) => {
        assert.equal(await bodies(server.url, ids), before, `${name}, then ${workers} workers`);
      });
      assert.equal(entries(dir), [...shardNames(workers), LAYOUT_FILE]);
    }
});

test("a journal that cannot be re-sharded refuses the start, names both counts and the way out, and stays", async () => {
  const dataDir = join(root, "corrupt");
  await withJournal(dataDir, async (base) => void (await populate(base, 2, 1)));
  const segment = join(
    dataDir,
    "shard-0",
    readdirSync(join(dataDir, "shard-0")).find((n) => n.endsWith(".tj"))!,
  );
  const bytes = readFileSync(segment);
  bytes[40] ^= 0xff; // inside the first entry's body, with entries after it: corruption, not a torn tail
  writeFileSync(segment, bytes);
  const err = await startSessionServer({ engineUrl: engine.url, workers: 2, dataDir, logLevel: "silent" }).then(
    () => assert.unreachable("a corrupt journal must not be re-sharded"),
    (e: unknown) => e,
  );
  assert.instance(err, DataDirLayoutError);
  assert.is((err as DataDirLayoutError).code, "TITO_ERR_DATA_DIR_LAYOUT");
  const message = (err as Error).message;
  assert.match(message, `the journal in ${dataDir} was written by 1 worker(s) and could not be re-sharded for 2`);
  assert.match(message, "journal corrupt");
  assert.match(message, "Nothing was changed: start with --workers 1");
  assert.equal(layout(dataDir), { workers: 1 });
  assert.equal(entries(dataDir), ["shard-0", LAYOUT_FILE]);
  assert.ok(readFileSync(segment).equals(bytes), "the old shard is untouched");
  assert.not.ok(existsSync(join(dataDir, "tito-server.lock")), "the refused start let the lock go");
});

test.run();
