// Forks through a journal re-shard (journal-reshard.ts, reshard-forks.ts; issue 43): a fork
// that lands apart from its parent is written out whole, and a fork of a fork either beside
// its (copied) parent or whole too; every one replays with its root's routing key, its
// budget (its root's, given at create) and its records, as the rebuilt sessions show
// (session-replay.ts over a real registry). The fast twin of test/server/fork-reshard.test.ts.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JournalRecordStore } from "../../../sessions/journal/journal-store.ts";
import { reshardJournal } from "../../../sessions/journal/journal-reshard.ts";
import { sessionRebuilder } from "../../../sessions/journal/session-replay.ts";
import { SessionRegistry } from "../../../sessions/registry.ts";
import type { TurnRecord } from "../../../sessions/journal/records.ts";

const root = mkdtempSync(join(tmpdir(), "tito-journal-reshard-fork-test-"));
test.after(() => rmSync(root, { recursive: true, force: true }));

const BUDGET = { maxTotalTokens: 900, maxTurns: 3 };

function record(seed: number): TurnRecord {
  return {
    timestamp: 1_700_000_000 + seed,
    method: "POST",
    path: "/v1/chat/completions",
    statusCode: 200,
    request: Buffer.from(`{"input_ids":[${seed}, ${seed + 1}]}`),
    response: [Buffer.from(`{"reply":${seed}}`)],
  };
}
const state = (index: number) => ({
  index,
  completionIds: [100 + index],
  assistant: { role: "assistant", content: `a${index}` },
  conversation: { messages: [{ role: "user", content: `q${index}` }] },
});

/** The old journal: root session `p` with a budget and two turns, fork `f` of it, fork `g` of `f`. */
async function oldJournal(dir: string): Promise<void> {
  const store = await JournalRecordStore.open({ dir, fsync: "never" });
  await store.open("p", { budget: BUDGET });
  for (const i of [0, 1]) await store.append("p", record(i), state(i));
  await store.fork("p", "f", 2, "p");
  await store.fork("f", "g", 1, "p");
  await store.close();
}

for (const [name, shards] of [
  ["the fork and its fork each apart", { p: 0, f: 1, g: 2 }],
  ["the fork apart, its fork beside it", { p: 0, f: 1, g: 1 }],
] as const)
  test(`${name}: each replays with its root's routing key and budget`, async () => {
    const dir = join(root, name.replace(/\W+/g, "-"));
    await oldJournal(join(dir, "old"));
    const workers = 3;
    const target = join(dir, "new");
    const shardOf = (id: string) => shards[id as keyof typeof shards];
    await reshardJournal({ sources: [join(dir, "old")], target, workers, shardOf });
    const registry = new SessionRegistry();
    for (let j = 0; j < workers; j++) {
      const store = await JournalRecordStore.open({ dir: join(target, `shard-${j}`), fsync: "never" });
      await store.recover(sessionRebuilder(registry));
      await store.close();
    }
    const got = (id: string) => {
      const t = registry.get(id);
      return { routingKey: t.routingKey, budget: t.budget, turns: t.assistantCount, ids: t.currentIds };
    };
    assert.equal(got("p"), { routingKey: "p", budget: BUDGET, turns: 2, ids: [1, 2, 101] });
    assert.equal(got("f"), { routingKey: "p", budget: BUDGET, turns: 2, ids: [1, 2, 101] });
    assert.equal(got("g"), { routingKey: "p", budget: BUDGET, turns: 1, ids: [0, 1, 100] });
  });

test.run();
