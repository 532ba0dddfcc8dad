// The engine request body: spliced onto the client's bytes when it can be, re-serialized
// when the client sent a key TITO forces; either way it parses to the same object as
// `{...body, ...forced, input_ids}`.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { buildUpstreamBody } from "../../engine/request-body.ts";
import { idsBytes, idsText } from "../../sessions/ids-text.ts";

const forced = { logprobs: true, return_meta_info: true, no_stop_trim: false, return_routed_experts: true };
const ids = [151644, 872, 198, 9707, 0, 151645];

function check(text: string, expectSplice: boolean) {
  const bytes = Buffer.from(text, "utf8");
  const body = JSON.parse(text);
  const out = Buffer.concat(buildUpstreamBody(bytes, body, forced, ids));
  const expected = { ...body, ...forced, input_ids: ids };
  assert.equal(JSON.parse(out.toString("utf8")), expected, text);
  assert.equal(Object.keys(JSON.parse(out.toString("utf8"))), Object.keys(expected), `key order: ${text}`);
  // Spliced: the output starts with the client's bytes up to (not including) its closing brace.
  const spliced = out.toString("utf8").startsWith(text.trimEnd().slice(0, -1));
  assert.is(spliced, expectSplice, `${expectSplice ? "spliced" : "re-serialized"}: ${text}`);
  assert.equal(body, JSON.parse(text), "the parsed body is not mutated");
}

test("a body without forced keys keeps the client's bytes and gains the fields at the end", () => {
  check('{"model":"m","messages":[{"role":"user","content":"héllo \\u00e9 \\"q\\" {}"}],"temperature":1.0}', true);
  check('{"messages":[{"role":"user","content":"x"}],"max_tokens":8}\n  \t', true); // trailing whitespace
  check('  {"messages":[{"role":"user","content":"x"}], "nested":{"a":[1,2,{"b":null}]}}', true);
  check(
    '{"messages":[{"role":"user","content":"日本語 🎉"}],"tools":[{"type":"function","function":{"name":"f"}}]}',
    true,
  );
});

test("the client's spelling of numbers and strings is kept (it parses to the same values)", () => {
  const text = '{"messages":[{"role":"user","content":"\\u0041"}],"temperature":1.0,"top_p":1e-1}';
  const out = Buffer.concat(buildUpstreamBody(Buffer.from(text), JSON.parse(text), forced, ids)).toString();
  assert.ok(
    out.startsWith('{"messages":[{"role":"user","content":"\\u0041"}],"temperature":1.0,"top_p":1e-1,"logprobs":true,'),
    out,
  );
  assert.ok(out.endsWith(`"input_ids":[${ids.join(",")}]}`), out);
});

test("a body that sets a forced key or input_ids is re-serialized: the forced value wins, no duplicate keys", () => {
  for (const text of [
    '{"messages":[{"role":"user","content":"x"}],"logprobs":false}',
    '{"messages":[{"role":"user","content":"x"}],"input_ids":[1,2,3]}',
    '{"return_routed_experts":false,"messages":[{"role":"user","content":"x"}]}',
  ]) {
    check(text, false);
    const out = Buffer.concat(buildUpstreamBody(Buffer.from(text), JSON.parse(text), forced, ids)).toString();
    assert.is(out, JSON.stringify({ ...JSON.parse(text), ...forced, input_ids: ids }));
  }
});

test("no forced fields at all: only input_ids is added", () => {
  const text = '{"messages":[{"role":"user","content":"x"}]}';
  const out = Buffer.concat(buildUpstreamBody(Buffer.from(text), JSON.parse(text), {}, [1, 2])).toString();
  assert.is(out, '{"messages":[{"role":"user","content":"x"}],"input_ids":[1,2]}');
});

test("ids text equals a plain join, for every id size, a long prompt and no ids", () => {
  const ids = [0, 7, 10, 99, 100, 151644, 872, 198, 2147483647, -1, -2147483648];
  assert.is(idsText(ids), ids.join(","));
  assert.is(idsText([]), "");
  const long = Array.from({ length: 200_000 }, (_, i) => (i * 7919) % 151_936);
  assert.is(idsText(long), long.join(","), "larger than the kept scratch buffer");
  assert.is(idsText(ids), ids.join(","), "a later short one after it");
  // The bytes are the same text, and each call's own: a later call does not write over an earlier result.
  const first = idsBytes(ids);
  assert.is(idsBytes(long).toString("latin1"), long.join(","));
  assert.is(idsBytes([5, 6]).toString("latin1"), "5,6");
  assert.is(first.toString("latin1"), ids.join(","));
  assert.is(idsBytes([]).length, 0);
  const out = buildUpstreamBody(Buffer.from('{"messages":[]}'), { messages: [] }, {}, long, idsBytes(long));
  assert.equal(JSON.parse(Buffer.concat(out).toString()).input_ids, long);
});

test("ids text at the digit-group edges, and every length after every other, equals a plain join", () => {
  const edges = [0, 9, 10, 999, 1000, 9999, 10_000, 10_001, 99_999, 100_000, 9_999_999, 99_999_999, 100_000_000];
  assert.is(idsText(edges), edges.join(","));
  assert.is(idsBytes(edges).toString("latin1"), edges.join(","));
  // Each length of id before each other: a word stored past an id's digits is overwritten, never left.
  const mixed = edges.flatMap((a) => edges.map((b) => [a, b])).flat();
  assert.is(idsText(mixed), mixed.join(","));
  assert.is(idsBytes(mixed).toString("latin1"), mixed.join(","));
  for (const one of edges) assert.is(idsBytes([one]).toString("latin1"), String(one));
});

test("a spliced body is its parts: the client's bytes and the prompt's ids themselves, not copies", () => {
  const text = '{"messages":[{"role":"user","content":"x"}],"max_tokens":8}';
  const bytes = Buffer.from(text);
  const promptBytes = idsBytes(ids);
  const parts = buildUpstreamBody(bytes, JSON.parse(text), forced, ids, promptBytes);
  // A history of ~500 KB and its ~480 KB of ids were copied into one Buffer on every turn.
  assert.ok(parts.length > 1, "in parts");
  assert.is(parts[0]!.buffer, bytes.buffer, "the client's bytes, not a copy of them");
  assert.is(parts[0]!.byteOffset, bytes.byteOffset);
  assert.ok(parts.includes(promptBytes), "the ids' bytes, not a copy of them");
  assert.equal(JSON.parse(Buffer.concat(parts).toString()), { ...JSON.parse(text), ...forced, input_ids: ids });
});

test.run();
