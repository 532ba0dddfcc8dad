import { test } from "uvu";
import * as assert from "uvu/assert";
import { EngineReplyError } from "../../sessions/errors.ts";
import { scanReply, R3_KEYS } from "../../engine/reply-scan.ts";
import { scanGenerateReply } from "../../engine/sglang-generate.ts";

/** What the client copy must equal: JSON.parse of the reply with every choice's R3 keys deleted. */
function expectedClient(text: string): unknown {
  const v = JSON.parse(text);
  for (const choice of Array.isArray(v?.choices) ? v.choices : []) {
    const meta = choice?.meta_info;
    if (meta && typeof meta === "object" && !Array.isArray(meta)) for (const k of R3_KEYS) delete meta[k];
  }
  return v;
}

/** The same bytes cut into chunks at seeded random points, some of one byte. */
function chunked(buf: Buffer, seed: number): Buffer[] {
  const r = rng(seed);
  const out: Buffer[] = [];
  let at = 0;
  while (at < buf.length) {
    const n = r() < 0.3 ? 1 : 1 + Math.floor(r() * 40);
    out.push(buf.subarray(at, at + n));
    at += n;
  }
  return out;
}

let checks = 0;
/** The offsets of every '"' byte, as the engine client indexes them while receiving. */
function quoteOffsets(buf: Buffer): number[] {
  const out: number[] = [];
  for (let i = 0; i < buf.length; i++) if (buf[i] === 0x22) out.push(i);
  return out;
}

function check(text: string) {
  const whole = scanReply(Buffer.from(text));
  const scanned = scanReply(chunked(Buffer.from(text), ++checks));
  assert.equal(
    Buffer.concat(scanned.clientBody),
    Buffer.concat(whole.clientBody),
    "chunked and whole bodies give the same client copy",
  );
  const indexed = scanReply(chunked(Buffer.from(text), ++checks), quoteOffsets(Buffer.from(text)));
  assert.equal(
    Buffer.concat(indexed.clientBody),
    Buffer.concat(whole.clientBody),
    "a quote index gives the same client copy",
  );
  assert.equal(
    [indexed.message, indexed.completionIds, indexed.strippedR3],
    [whole.message, whole.completionIds, whole.strippedR3],
  );
  const client = Buffer.concat(scanned.clientBody).toString("utf8");
  assert.equal(JSON.parse(client), expectedClient(text), text.slice(0, 300));
  const parsed = JSON.parse(text);
  assert.equal(scanned.message, parsed.choices[0].message);
  assert.equal(
    scanned.completionIds,
    parsed.choices[0].meta_info.output_token_logprobs.map((e: number[]) => e[1]),
  );
  assert.is(whole.strippedR3, scanned.strippedR3);
  return whole;
}

const reply = (meta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: "x",
    choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop", meta_info: meta }],
    ...extra,
  });
const base = {
  output_token_logprobs: [
    [-0.1, 7],
    [-0.2, 8],
  ],
  completion_tokens: 2,
};

test("R3 payloads are cut wherever they sit in meta_info, other members keep their bytes", () => {
  for (const order of [
    { routed_experts: "QUJD", ...base },
    { ...base, routed_experts: "QUJD" },
    { output_token_logprobs: base.output_token_logprobs, routed_experts: "QUJD", completion_tokens: 2 },
    { routed_experts: "QUJD", indexer_topk: "RA==", ...base },
    { routed_experts: "QUJD", ...base, indexer_topk: [1, [2, { a: "]" }]] },
  ]) {
    const s = check(reply(order));
    assert.ok(s.strippedR3);
    assert.not.match(Buffer.concat(s.clientBody).toString(), "QUJD");
  }
  const none = check(reply(base));
  assert.not.ok(none.strippedR3);
  assert.is(none.clientBody.length, 1, "no edits: the body passes through as one view");
});

test("only meta_info's R3 keys of each choice are cut, not look-alikes elsewhere", () => {
  const text = JSON.stringify({
    routed_experts: "top-level stays",
    choices: [
      {
        message: { role: "assistant", content: 'say "routed_experts": 1 \\" }', routed_experts: "in message stays" },
        meta_info: { ...base, routed_experts: "AAAA", nested: { routed_experts: "nested stays" } },
      },
      {
        message: { role: "assistant", content: "second" },
        meta_info: { routed_experts: "BBBB", indexer_topk: "CCCC" },
      },
      { message: { role: "assistant", content: "third" }, meta_info: { routed_experts: "DDDD", completion_tokens: 1 } },
    ],
    meta_info: { routed_experts: "top meta stays" },
  });
  const s = check(text);
  const client = Buffer.concat(s.clientBody).toString();
  for (const kept of ["top-level stays", "in message stays", "nested stays", "top meta stays"])
    assert.match(client, kept);
  for (const cut of ["AAAA", "BBBB", "CCCC", "DDDD"]) assert.not.match(client, cut);
});

test("escaped quotes, backslashes, escaped keys and unicode", () => {
  check(reply({ ...base, "routed\\u005fexperts": "ESCAPEDKEY" }));
  check(reply({ ...base, note: 'a \\" b \\\\" c', routed_experts: "x" }, { 'weird\\"key': "v\\\\" }));
  check(reply({ ...base, routed_experts: "é☃𝄞" }));
  const spaced = `  {\n "choices" : [ { "meta_info" : { "routed_experts" : "Q" ,\n "output_token_logprobs" : [ [ -1.5e-3 , 5 ] ] , "completion_tokens" : 1 } , "message" : { "role" : "assistant" , "content" : "\\"" } } ] }\n`;
  const s = check(spaced);
  assert.is(s.message.content, '"');
  // An escaped key decodes to routed_experts for JSON.parse, so it is cut too.
  const esc = scanReply(Buffer.from(reply({ ...base, "routed\u005fexperts": "ESCAPEDKEY" })));
  assert.not.match(Buffer.concat(esc.clientBody).toString(), "ESCAPEDKEY");
});

test("a duplicated key: the last one counts, as for JSON.parse", () => {
  const text = `{"choices":[{"message":{"role":"assistant","content":"old"},"meta_info":{"routed_experts":"A","output_token_logprobs":[[0,1]],"completion_tokens":1}}],"choices":[{"message":{"role":"assistant","content":"new"},"meta_info":{"output_token_logprobs":[[0,2],[0,3]],"completion_tokens":2,"routed_experts":"B"}}]}`;
  const s = check(text);
  assert.is(s.message.content, "new");
  assert.equal(s.completionIds, [2, 3]);
});

// A seeded random JSON generator with hostile strings, to compare against JSON.parse at scale.
function rng(seed: number) {
  return () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
}
const nasty = ['"', "\\", '\\"', "routed_experts", "meta_info", "}", "]", ",", ":", "\n", "é", "\u0001", '{"a":1}'];
function randomValue(r: () => number, depth: number): unknown {
  const k = r();
  if (depth > 3 || k < 0.3) {
    const pick = Math.floor(r() * 6);
    if (pick === 0) return nasty[Math.floor(r() * nasty.length)]! + nasty[Math.floor(r() * nasty.length)]!;
    if (pick === 1) return Math.floor(r() * 1e6) / 100 - 5000;
    if (pick === 2) return r() < 0.5;
    if (pick === 3) return null;
    if (pick === 4) return 1e21 * r();
    return "";
  }
  if (k < 0.6) return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(r() * 4); i > 0; i--)
    o[nasty[Math.floor(r() * nasty.length)]! + i] = randomValue(r, depth + 1);
  if (r() < 0.3) o.routed_experts = randomValue(r, depth + 1);
  return o;
}

test("random replies with hostile strings agree with JSON.parse", () => {
  const r = rng(42);
  for (let n = 0; n < 300; n++) {
    const choices = Array.from({ length: 1 + Math.floor(r() * 3) }, () => {
      const meta: Record<string, unknown> = {};
      for (const key of ["a", "routed_experts", "output_token_logprobs", "indexer_topk", "b"])
        if (r() < 0.7) meta[key] = randomValue(r, 2);
      meta.output_token_logprobs = [
        [-0.5, 11],
        [-0.25, 12],
      ];
      meta.completion_tokens = 2;
      return {
        message: { role: "assistant", content: String(randomValue(r, 9)) },
        meta_info: meta,
        junk: randomValue(r, 1),
      };
    });
    const text = JSON.stringify(
      { x: randomValue(r, 0), choices, y: randomValue(r, 0) },
      null,
      n % 3 === 0 ? 1 : undefined,
    );
    check(text);
  }
});

const rejects = (text: string, pattern: RegExp) => {
  assert.throws(
    () => scanReply(Buffer.from(text)),
    (e: unknown) => e instanceof EngineReplyError && e.status === 502 && pattern.test((e as Error).message),
    text,
  );
};

test("invalid replies are 502s naming the problem", () => {
  rejects("not json", /not valid JSON/);
  rejects('{"choices": [', /not valid JSON/);
  rejects('{"choices": []} trailing', /not valid JSON/);
  rejects('{"a": "unterminated}', /not valid JSON/);
  rejects('{"a": tru}', /not valid JSON/);
  rejects('{"a" 1}', /not valid JSON/);
  rejects(
    '{"choices":[{"message":{"role":"assistant","content":"x"},"meta_info":{"output_token_logprobs":[[0,1],],"completion_tokens":1}}]}',
    /not valid JSON/,
  );
  rejects("[1]", /expected a JSON object/);
  rejects('{"bad\\qkey": 1}', /not valid JSON/);
  rejects('{"a":' + "[".repeat(100_000) + "]".repeat(100_000) + "}", /nesting too deep/);
  rejects('{"choices": []}', /no choices\[0\]\.message/);
  rejects(
    JSON.stringify({ choices: [{ message: { role: "assistant", content: "x" } }] }),
    /missing choices\[0\]\.meta_info\.output_token_logprobs/,
  );
  rejects(
    JSON.stringify({ choices: [{ message: { role: "assistant", content: "x" }, meta_info: {} }] }),
    /output_token_logprobs/,
  );
  rejects(
    JSON.stringify({ choices: [{ message: { role: "assistant", content: null }, meta_info: base }] }),
    /^assistant message content is None/,
  );
  rejects(
    JSON.stringify({
      choices: [{ message: { role: "assistant", content: "x" }, meta_info: { ...base, completion_tokens: 3 } }],
    }),
    /length mismatch: len\(output_token_logprobs\)=2 != meta_info\.completion_tokens=3/,
  );
  rejects(
    JSON.stringify({
      choices: [{ message: { role: "assistant", content: "x" }, meta_info: { output_token_logprobs: [[0, 1]] } }],
    }),
    /length mismatch/,
  );
  rejects(
    JSON.stringify({
      choices: [
        {
          message: { role: "assistant", content: "x" },
          meta_info: { output_token_logprobs: [[0, "a"]], completion_tokens: 1 },
        },
      ],
    }),
    /integer token id/,
  );
  rejects(
    JSON.stringify({
      choices: [
        {
          message: { role: "assistant", content: "x" },
          meta_info: { output_token_logprobs: [0.5], completion_tokens: 1 },
        },
      ],
    }),
    /integer token id/,
  );
});

test("a 16 MiB routed_experts string is cut without touching other bytes", () => {
  const payload = "A".repeat(16 << 20);
  const text = reply({ ...base, routed_experts: payload });
  const body = Buffer.from(text);
  const s = scanReply(body);
  const client = Buffer.concat(s.clientBody);
  assert.ok(client.length < 1000);
  assert.equal(JSON.parse(client.toString()), expectedClient(text));
  assert.ok(
    s.clientBody.every((b) => b.length === 1 || b.buffer === body.buffer),
    "views into the original bytes, not copies",
  );
});

test("the engine's weight_version: choices[0].meta_info first, else metadata; /generate's meta_info", () => {
  const reply = (meta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      ...extra,
      choices: [
        {
          message: { role: "assistant", content: "hi" },
          meta_info: { output_token_logprobs: [[-0.5, 7]], completion_tokens: 1, ...meta },
        },
      ],
    });
  const version = (text: string) => scanReply(chunked(Buffer.from(text), ++checks)).engineWeightVersion;
  assert.is(version(reply({ weight_version: "step-12" })), "step-12");
  assert.is(version(reply({ weight_version: 12 })), "12", "a number is taken as its text");
  assert.is(version(reply({}, { metadata: { weight_version: "default" } })), "default");
  assert.is(version(reply({ weight_version: "a" }, { metadata: { weight_version: "b" } })), "a");
  assert.is(version(reply({ weight_version: null })), undefined);
  assert.is(version(reply({})), undefined);
  const generate = (meta: Record<string, unknown>) =>
    scanGenerateReply([
      Buffer.from(
        JSON.stringify({
          text: "hi",
          meta_info: { output_token_logprobs: [[-0.5, 7, null]], completion_tokens: 1, prompt_tokens: 3, ...meta },
        }),
      ),
    ]).weightVersion;
  assert.is(generate({ weight_version: "v9" }), "v9");
  assert.is(generate({}), undefined);
});

test.run();
