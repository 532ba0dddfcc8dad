// The session core on a journal store, against the simulated engine: a turn whose journal
// write fails (ENOSPC from /dev/full) is a 500 naming the cause and changes nothing, the
// session and its neighbour carry on; a new core on the same directory replays the
// sessions (tool loop, rollback, delete) to the same GET bodies and the same next prompt.
import { chatRequest, coreFor, responseText } from "../../helpers/core.ts";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JournalRecordStore, messagesTurn, type MessageMatcher, type SessionCore } from "../../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../../server/sim-engine/sim-engine.ts";
import type { WireMessage } from "../../helpers/bodies.ts";
import { qwen3 } from "../fixtures.ts";

let engine: SimEngine;
const root = mkdtempSync(join(tmpdir(), "tito-journal-core-"));
const cores: SessionCore[] = [];

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: qwen3(), routedExpertsBytes: 8192 });
});
test.after(async () => {
  for (const c of cores) await c.close();
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

async function core(dir: string, segmentBytes?: number, messageMatcher?: MessageMatcher): Promise<SessionCore> {
  const recordStore = await JournalRecordStore.open({ dir, fsync: "every", segmentBytes });
  const c = coreFor({
    engineUrl: engine.url,
    tokenizerFolder: qwen3(),
    routingReplay: true,
    allowedAppendRoles: ["tool", "user"],
    recordStore,
    messageMatcher,
  });
  await c.recover();
  cores.push(c);
  return c;
}

async function turn(c: SessionCore, id: string, messages: unknown[]) {
  const res = await c.chat(id, chatRequest(messages));
  const body = JSON.parse(await responseText(res));
  return { res, body, message: body.choices?.[0]?.message };
}

async function newSession(c: SessionCore): Promise<string> {
  return JSON.parse(await responseText(await c.create())).session_id;
}

test("a failed journal write fails that turn with 500 and the cause; nothing else changes", async () => {
  const dir = join(root, "enospc");
  const c = await core(dir, 1024); // every entry with a reply takes a segment of its own
  const [a, b] = [await newSession(c), await newSession(c)];
  const messages: unknown[] = [{ role: "user", content: "Weather in Paris?" }];
  const first = await turn(c, a, messages);
  assert.is(first.res.status, 200);
  messages.push(first.message, {
    role: "tool",
    tool_call_id: first.message.tool_calls?.[0]?.id,
    content: '{"temp_c": 21}',
  });
  const before = await responseText(await c.get(a));

  symlinkSync("/dev/full", join(dir, "00000003.tj")); // the next segment
  const failed = await turn(c, a, messages);
  assert.is(failed.res.status, 500);
  assert.match(failed.body.error, `journal write failed (${join(dir, "00000003.tj")}): `);
  assert.match(failed.body.error, /ENOSPC/);
  assert.is(await responseText(await c.get(a)), before, "the failed turn left the session as it was");

  const retried = await turn(c, a, messages);
  assert.is(retried.res.status, 200, "the same turn goes through on a fresh segment");
  assert.is(JSON.parse(await responseText(await c.get(a))).records.length, 2);
  assert.is((await turn(c, b, [{ role: "user", content: "Weather in Rome?" }])).res.status, 200);
});

test("a new core on the same journal replays every session to the same bodies and the same next prompt", async () => {
  const dir = join(root, "replay");
  const c = await core(dir);
  const [kept, rolled, deleted] = [await newSession(c), await newSession(c), await newSession(c)];
  const histories = new Map<string, unknown[]>();
  for (const id of [kept, rolled, deleted]) {
    const messages: unknown[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: `Weather for ${id.slice(0, 4)}?` },
    ];
    const first = await turn(c, id, messages);
    messages.push(first.message, {
      role: "tool",
      tool_call_id: first.message.tool_calls?.[0]?.id,
      content: '{"temp_c": 18}',
    });
    const second = await turn(c, id, messages);
    messages.push(second.message);
    histories.set(id, messages);
  }
  // Roll `rolled` back one turn: the tool answers differently.
  const alt = histories.get(rolled)!.slice(0, 3);
  alt.push({ role: "tool", tool_call_id: (alt[2] as WireMessage).tool_calls?.[0]?.id, content: '{"temp_c": -5}' });
  const redo = await turn(c, rolled, alt);
  assert.is(redo.res.status, 200);
  histories.set(rolled, [...alt, redo.message]);
  assert.is((await c.delete(deleted)).status, 204);
  const bodies = new Map([kept, rolled].map((id) => [id, ""]));
  for (const id of bodies.keys()) bodies.set(id, await responseText(await c.get(id)));

  const replayed = await core(dir);
  for (const [id, body] of bodies)
    assert.is(await responseText(await replayed.get(id)), body, `session ${id} after replay`);
  assert.is((await replayed.get(deleted)).status, 404);
  for (const id of bodies.keys()) {
    const accumulated: number[] = JSON.parse(bodies.get(id)!).metadata.accumulated_token_ids;
    const next = await turn(replayed, id, [...histories.get(id)!, { role: "user", content: "And tomorrow?" }]);
    assert.is(next.res.status, 200, JSON.stringify(next.body));
    const records = JSON.parse(await responseText(await replayed.get(id))).records;
    assert.equal(records.at(-1).request.input_ids.slice(0, accumulated.length), accumulated);
  }
});

test("large replies (pooled receive buffers) from concurrent sessions: each record is its own reply, byte for byte", async () => {
  // Replies over 256 KiB are received into reused slabs, released after the journal write:
  // a slab reused too early would put one session's bytes into another's record or reply.
  const big = await startSimEngine({ tokenizerFolder: qwen3(), routedExpertsBytes: 600_000 });
  try {
    const recordStore = await JournalRecordStore.open({ dir: join(root, "pooled"), fsync: "never" });
    const c = coreFor({
      engineUrl: big.url,
      tokenizerFolder: qwen3(),
      routingReplay: true,
      allowedAppendRoles: ["tool", "user"],
      recordStore,
    });
    cores.push(c);
    const ids = [await newSession(c), await newSession(c), await newSession(c)];
    const histories = ids.map(
      (id, i) => [{ role: "user", content: `Session ${i}: what is the weather in city ${i}?` }] as unknown[],
    );
    const replies: unknown[][] = ids.map(() => []);
    for (let k = 0; k < 4; k++) {
      await Promise.all(
        ids.map(async (id, i) => {
          const { res, body, message } = await turn(c, id, histories[i]!);
          assert.is(res.status, 200, JSON.stringify(body));
          assert.is(body.choices[0].message.content === undefined, false);
          replies[i]!.push(body);
          histories[i]!.push(message);
          histories[i]!.push({ role: "user", content: `And tomorrow (${k})?` });
        }),
      );
    }
    for (const [i, id] of ids.entries()) {
      const got = JSON.parse(await responseText(await c.get(id)));
      assert.is(got.records.length, 4);
      for (const [k, record] of got.records.entries()) {
        const response = record.response;
        const meta = response.choices[0].meta_info;
        assert.is(meta.routed_experts.length, 800_000, "the whole routing-replay payload is in the record");
        delete meta.routed_experts;
        assert.equal(
          response,
          replies[i]![k],
          `session ${i} turn ${k}: the record is the reply the client got, minus routed_experts`,
        );
      }
    }
    // The entries' checksums used the CRC the engine client computed as each reply arrived:
    // a replay verifies every entry, and would refuse a wrong one.
    await c.close();
    cores.splice(cores.indexOf(c), 1);
    const again = coreFor({
      engineUrl: big.url,
      tokenizerFolder: qwen3(),
      routingReplay: true,
      recordStore: await JournalRecordStore.open({ dir: join(root, "pooled"), fsync: "never" }),
    });
    cores.push(again);
    assert.equal(await again.recover(), { sessions: 3, turns: 12 }, "every entry verified on replay");
  } finally {
    await big.close();
  }
});

test("the stored messages a matcher kept over the client's copies are what the journal replays", async () => {
  const dir = join(root, "adopted");
  const tolerant = await core(dir, undefined, "role-content");
  const id = await newSession(tolerant);
  const history: unknown[] = [{ role: "user", content: "Weather in Paris?" }];
  const first = await turn(tolerant, id, history);
  const call = first.message.tool_calls[0];
  history.push(first.message, { role: "tool", tool_call_id: call.id, content: '{"temp_c": 21}' });
  // The harness re-ids the call (and its result): role-content matches it, and keeps the stored ones.
  const reIded = [
    history[0],
    { ...first.message, tool_calls: [{ ...call, id: "toolu_1" }] },
    { role: "tool", tool_call_id: "toolu_1", content: '{"temp_c": 21}' },
  ];
  const second = await turn(tolerant, id, reIded);
  assert.is(second.res.status, 200);
  // A strict core on the same journal: the server's own history still matches all of it.
  const strict = await core(dir, undefined, "strict");
  const third = await turn(strict, id, [...history, second.message, { role: "user", content: "Tomorrow?" }]);
  assert.is(third.res.status, 200);
  const got = JSON.parse(await responseText(await strict.get(id)));
  assert.is(got.records.length, 3, "no rollback: the replayed session holds the stored ids, not toolu_1");
  const [, r1, r2] = got.records;
  const extended = [
    ...r1.request.input_ids,
    ...r1.response.choices[0].meta_info.output_token_logprobs.map((e: number[]) => e[1]),
  ];
  assert.equal(r2.request.input_ids.slice(0, extended.length), extended);
});

test("the API a session speaks comes back from the journal: a replayed messages session refuses chat", async () => {
  const dir = join(root, "client-api");
  const c = await core(dir);
  const [anthropic, chat] = [await newSession(c), await newSession(c)];
  const ask = { model: "m", max_tokens: 60, messages: [{ role: "user", content: "Hi" }] };
  const sent = await messagesTurn(c, anthropic, {
    ...chatRequest([]),
    path: "/v1/messages",
    body: Buffer.from(JSON.stringify(ask)),
  });
  assert.is(sent.status, 200, await responseText(sent));
  assert.is((await turn(c, chat, [{ role: "user", content: "Hi" }])).res.status, 200);
  const replayed = await core(dir);
  const refused = await turn(replayed, anthropic, [{ role: "user", content: "Hi" }]);
  assert.is(refused.res.status, 400);
  assert.match(refused.body.error, /speaks the messages API/);
  const other = await messagesTurn(replayed, chat, {
    ...chatRequest([]),
    path: "/v1/messages",
    body: Buffer.from(JSON.stringify(ask)),
  });
  assert.is(other.status, 400);
  const body = JSON.parse(await responseText(other));
  assert.equal([body.type, body.error.type], ["error", "invalid_request_error"]);
  assert.match(body.error.message, /speaks the chat API/);
});

test.run();
