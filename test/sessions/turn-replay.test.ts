// The kept reply of idempotent replay (sessions/turn-replay.ts): answered again bytes for
// bytes (headers, body, a stream's event boundaries) whether it is still as it went out or
// packed (deflated) after the session stayed idle; a packed reply holds a fraction of the
// characters; a reply the session moved past is let go; a resend of anything else gets nothing.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { TurnReplays } from "../../sessions/turn-replay.ts";
import { Trajectory } from "../../sessions/trajectory.ts";

const RETRY = { "x-stainless-retry-count": "1" };

/** A trajectory with `turns` committed turns (its version moves with each). */
function trajectory(turns: number): Trajectory {
  const t = new Trajectory("s");
  const messages: { role: string; content: string }[] = [];
  const ids: number[] = [];
  for (let k = 0; k < turns; k++) {
    messages.push({ role: "user", content: `u${k}` }, { role: "assistant", content: `a${k}` });
    const prompt = [...ids, 10 + k];
    t.commit({ promptIds: prompt, completionIds: [20 + k], messages: [...messages] }, 0);
    ids.splice(0, ids.length, ...prompt, 20 + k);
  }
  return t;
}

/** A chat reply as SGLang's chat API gives it, logprobs included (~1 KiB). */
function chatReply(k: number): Buffer {
  const logprobs = Array.from({ length: 32 }, (_, i) => [-((i * 37 + k) % 400) / 100, 1000 + i * 131]);
  return Buffer.from(
    JSON.stringify({
      id: `chatcmpl-${k}`,
      object: "chat.completion",
      created: 1796529443,
      model: "qwen3",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: `Reply ${k}: the quick brown fox — jumps over the lazy dog ✓` },
          logprobs: null,
          finish_reason: "stop",
          meta_info: { id: `m${k}`, prompt_tokens: 33045, completion_tokens: 32, output_token_logprobs: logprobs },
        },
      ],
      usage: { prompt_tokens: 33045, completion_tokens: 32, total_tokens: 33077 },
    }),
  );
}

const headers = { "content-type": "application/json", date: "Sun, 06 Dec 2026 04:00:00 GMT", "x-note": "café" };
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function replayed(replays: TurnReplays, t: Trajectory, request: Buffer) {
  const again = replays.match(t, request, RETRY);
  assert.ok(again, "a retry of the last turn gets its reply");
  const pieces: Buffer[] = [];
  if (Array.isArray(again.body)) pieces.push(...again.body);
  else for await (const piece of again.body) pieces.push(piece);
  return { headers: again.headers, pieces };
}

test("a whole reply: the same bytes and headers before and after it is packed, packed to under half", async () => {
  const replays = new TurnReplays(undefined, 20);
  const t = trajectory(2);
  const request = Buffer.from('{"messages":[]}');
  const body = chatReply(1);
  replays.keep(t, t.version, { body: request, headers: {} }, { headers, pieces: [body], streamed: false });
  const raw = replays.held(t)!;
  assert.is(raw.packed, false, "kept as it went out at first");
  const first = await replayed(replays, t, request);
  assert.equal(first.headers, headers);
  assert.ok(Buffer.concat(first.pieces).equals(body), "the same bytes");
  await tick(60);
  const packed = replays.held(t)!;
  assert.is(packed.packed, true, "packed once the session stayed idle");
  assert.ok(packed.chars * 2 < raw.chars, `packed ${packed.chars} characters of ${raw.chars}`);
  const second = await replayed(replays, t, request);
  assert.equal(second.headers, headers, "the same headers, packed");
  assert.ok(Buffer.concat(second.pieces).equals(body), "the same bytes, packed");
  assert.is(replays.match(t, Buffer.from('{"messages":[1]}'), RETRY), undefined, "another body gets nothing");
  assert.is(replays.match(t, request, {}), undefined, "nor does a request that is not a resend");
  replays.close();
});

test("a stream: each event as it went out, packed or not; any bytes round-trip", async () => {
  const replays = new TurnReplays(undefined, 10);
  const t = trajectory(1);
  const request = Buffer.from('{"stream":true}');
  const events = [
    Buffer.from('data: {"choices":[{"delta":{"content":"héllo"}}]}\n\n'),
    Buffer.from([0, 255, 10, 13, 200, 1]),
    Buffer.from("data: [DONE]\n\n"),
  ];
  replays.keep(
    t,
    t.version,
    { body: request, headers: { "idempotency-key": "k1" } },
    {
      headers,
      pieces: events,
      streamed: true,
    },
  );
  await tick(40);
  assert.is(replays.held(t)!.packed, true);
  const again = replays.match(t, request, { "idempotency-key": "k1" });
  assert.ok(again, "an equal Idempotency-Key is a resend");
  const pieces: Buffer[] = [];
  for await (const piece of again.body as AsyncIterable<Buffer>) pieces.push(piece);
  assert.is(pieces.length, events.length, "event for event");
  pieces.forEach((piece, i) => assert.ok(piece.equals(events[i]!), `event ${i}`));
  replays.close();
});

test("a reply the session moved past is let go; the next one is answered, packed in its turn", async () => {
  const replays = new TurnReplays(undefined, 30);
  const t = trajectory(1);
  const first = Buffer.from('{"turn":1}');
  replays.keep(t, t.version, { body: first, headers: {} }, { headers, pieces: [chatReply(1)], streamed: false });
  t.commit({ promptIds: [10, 20, 11], completionIds: [21], messages: [{ role: "user", content: "u" }] }, 0);
  assert.is(replays.match(t, first, RETRY), undefined, "the session moved on: nothing to replay");
  await tick(80);
  assert.is(replays.held(t), undefined, "and the reply it moved past is let go, not packed");
  const second = Buffer.from('{"turn":2}');
  replays.keep(t, t.version, { body: second, headers: {} }, { headers, pieces: [chatReply(2)], streamed: false });
  await tick(80);
  assert.is(replays.held(t)!.packed, true, "the last one is packed");
  const again = await replayed(replays, t, second);
  assert.ok(Buffer.concat(again.pieces).equals(chatReply(2)));
  replays.close();
});

test.run();
