// The cache salt across a weight update, end to end (docs/rl-loop.md, "Cache salt"): a
// server with the default --cache-salt session in front of a simulated engine that keeps a
// prefix cache. After pause and resume with a new version, a new session's first turn misses
// the engine's cache even though another session left the very same prefix cached under the
// old version, and its next turn hits; a session that started before the update keeps its
// salt and still hits. Read from the engine's meta_info.cached_tokens in the records.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { admin } from "../helpers/rollout.ts";
import { call, chat } from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

let engine: SimEngine;
let server: InProcessTree;

test.before(async () => {
  const tokenizerFolder = sharedFolder();
  engine = await startSimEngine({ prefixCache: true, tokenizerFolder });
  server = await startTree({
    engineUrl: engine.url,
    engineApi: "sglang-generate",
    workers: 1,
    tokenizerFolder,
    allowedAppendRoles: ["user"],
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

/** The engine's cached_tokens of each committed turn of the session. */
async function cachedTokens(id: string): Promise<number[]> {
  const res = await call<{ records: Array<{ response: { meta_info: { cached_tokens: number } } }> }>(
    server.url,
    "GET",
    `/sessions/${id}`,
  );
  assert.is(res.status, 200, res.text);
  return res.json.records.map((r) => r.response.meta_info.cached_tokens);
}

async function turn(id: string, messages: unknown[], next: string) {
  const { res, message } = await chat(server.url, id, messages);
  assert.is(res.status, 200, res.text);
  messages.push(message, { role: "user", content: next });
}

test("after a resume with a new version a session's first turn misses the cache, the next hits", async () => {
  const question = { role: "user", content: "Plan a three-day walking tour of Paris, with a museum each day." };
  assert.is((await admin(server.url, "POST", "/admin/resume", { weight_version: "v1" })).status, 200);
  await call(server.url, "PUT", "/sessions/before");
  const before: unknown[] = [question];
  await turn("before", before, "Make day two shorter.");
  await turn("before", before, "And day three?");
  const early = await cachedTokens("before");
  assert.is(early[0], 0, "a new prefix");
  assert.ok(early[1]! > 0, `the second turn hits the first's prefix: ${early}`);

  assert.is((await admin(server.url, "POST", "/admin/pause", { in_flight: "drain" })).status, 200);
  assert.is((await admin(server.url, "POST", "/admin/resume", { weight_version: "v2" })).status, 200);

  // The same opening as "before", whose prefix the engine holds, but under v1's salt.
  await call(server.url, "PUT", "/sessions/after");
  const after: unknown[] = [question];
  await turn("after", after, "Make day two shorter.");
  await turn("after", after, "And day three?");
  const late = await cachedTokens("after");
  assert.is(late[0], 0, "the new version's salt finds nothing of v1's KV");
  assert.ok(late[1]! > 0, `then the session hits its own prefix: ${late}`);

  // A session that started under v1 keeps v1's salt (`session`): it still hits its prefix.
  await turn("before", before, "Thanks.");
  const kept = await cachedTokens("before");
  assert.ok(kept[2]! > kept[1]!, `the old session's third turn hits more: ${kept}`);
});

test.run();
