// Completion parsing per family: what the token-level engine APIs turn a completion's text
// into (content, reasoning, tool calls, the malformed count). Ids come from a counter here;
// the default generator's shape is checked on its own.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { newToolCallId, selectFamily, type ParsedCompletion } from "../../sessions/families/index.ts";
import { defaultFamily } from "../../sessions/families/default.ts";
import { QWEN3_FORMAT } from "../../sessions/families/completion-formats.ts";
import { parseTagged } from "../../sessions/families/tagged-completion.ts";
import { qwen3 } from "./fixtures.ts";

const counter = () => {
  let n = 0;
  return () => `call_${++n}`;
};
const parse = (text: string): ParsedCompletion => parseTagged(text, QWEN3_FORMAT, { newId: counter() });
const call = (id: string, name: string, args: unknown) => ({
  id,
  type: "function",
  function: { name, arguments: JSON.stringify(args) },
});
const PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const ROME = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}\n</tool_call>';

test("selectFamily: the bundled Qwen3 folder parses as qwen3, 'default' as default", () => {
  const folder = qwen3();
  const text = "<think>\nr\n</think>\n\nhi<|im_end|>";
  assert.equal(selectFamily(folder).parseCompletion(text, { newId: counter() }), {
    content: "hi",
    reasoning_content: "r",
    malformedToolCalls: 0,
  });
  assert.equal(selectFamily(folder, "default").parseCompletion(text), { content: text, malformedToolCalls: 0 });
});

test("default: everything is content, verbatim (it knows no stop text, reasoning or tool syntax)", () => {
  for (const text of ["", "  plain\n", `<think>\nr\n</think>\n\n${PARIS}<|im_end|>`])
    assert.equal(defaultFamily(qwen3()).parseCompletion(text), { content: text, malformedToolCalls: 0 });
});

test("qwen3: a trailing <|im_end|> or <|endoftext|> is removed, present or not", () => {
  for (const text of ["It is sunny.", "It is sunny.<|im_end|>", "It is sunny.<|endoftext|>"])
    assert.equal(parse(text), { content: "It is sunny.", malformedToolCalls: 0 }, text);
  // Only at the end: elsewhere it is text the model wrote.
  assert.equal(parse("a<|im_end|>b"), { content: "a<|im_end|>b", malformedToolCalls: 0 });
});

test("qwen3: <think>…</think> is reasoning (newlines around it dropped); the rest is trimmed content", () => {
  assert.equal(parse("<think>\nLet me think.\nStill.\n</think>\n\nIt is sunny.<|im_end|>"), {
    content: "It is sunny.",
    reasoning_content: "Let me think.\nStill.",
    malformedToolCalls: 0,
  });
  // Spaces are the model's own: only the newlines the template writes back are dropped.
  assert.equal(parse("<think>\n  indented \n</think>\n\nok").reasoning_content, "  indented ");
  // An empty think block (thinking switched off inside the completion) gives no reasoning.
  assert.equal(parse("<think>\n\n</think>\n\nIt is sunny."), { content: "It is sunny.", malformedToolCalls: 0 });
  // No think block at all: no reasoning_content key.
  assert.not.ok("reasoning_content" in parse("It is sunny."));
});

test("qwen3: the prompt opened <think>, so the text before the first </think> is reasoning", () => {
  assert.equal(parse("need the weather\n</think>\n\nIt is sunny.<|im_end|>"), {
    content: "It is sunny.",
    reasoning_content: "need the weather",
    malformedToolCalls: 0,
  });
  // Only the first </think> closes it.
  assert.equal(parse("a</think>b</think>c"), { content: "b</think>c", reasoning_content: "a", malformedToolCalls: 0 });
  // A </think> inside a tool call's arguments is not the end of reasoning.
  const inCall = '<tool_call>\n{"name": "echo", "arguments": {"text": "</think>"}}\n</tool_call>';
  assert.equal(parse(inCall), {
    content: "",
    tool_calls: [call("call_1", "echo", { text: "</think>" })],
    malformedToolCalls: 0,
  });
});

test("qwen3: reasoning never closed: cut short (all reasoning), or ended by a tool call", () => {
  assert.equal(parse("<think>\nstill thinking about"), {
    content: "",
    reasoning_content: "still thinking about",
    malformedToolCalls: 0,
  });
  assert.equal(parse(`<think>\nneed a tool\n${PARIS}<|im_end|>`), {
    content: "",
    reasoning_content: "need a tool",
    tool_calls: [call("call_1", "get_weather", { city: "Paris" })],
    malformedToolCalls: 0,
  });
});

test("qwen3: a tool call; arguments become a JSON string; whitespace around the JSON is allowed", () => {
  const want = { content: "", tool_calls: [call("call_1", "get_weather", { city: "Paris" })], malformedToolCalls: 0 };
  assert.equal(parse(`${PARIS}<|im_end|>`), want);
  assert.equal(parse('<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>'), want);
  assert.equal(
    parse('<tool_call>\n\n  {"name": "get_weather",\n "arguments": {"city": "Paris"}}  \n\t</tool_call>'),
    want,
  );
  assert.is(parse(PARIS).tool_calls![0]!.function.arguments, '{"city":"Paris"}');
  // Nested and non-ASCII arguments survive as JSON.
  const nested = { q: { list: [1, 2.5, null, true], text: 'Zürich "quoted"\n' } };
  assert.equal(parse(`<tool_call>\n${JSON.stringify({ name: "f", arguments: nested })}\n</tool_call>`).tool_calls, [
    call("call_1", "f", nested),
  ]);
});

test("qwen3: several calls, in order, each with its own id", () => {
  assert.equal(parse(`${PARIS}\n${ROME}\n${PARIS}<|im_end|>`), {
    content: "",
    tool_calls: [
      call("call_1", "get_weather", { city: "Paris" }),
      call("call_2", "get_weather", { city: "Rome", days: 2 }),
      call("call_3", "get_weather", { city: "Paris" }),
    ],
    malformedToolCalls: 0,
  });
});

test("qwen3: reasoning, content and tool calls together", () => {
  assert.equal(parse(`<think>\nneed two cities\n</think>\n\nLet me check both.\n${PARIS}\n${ROME}<|im_end|>`), {
    content: "Let me check both.",
    reasoning_content: "need two cities",
    tool_calls: [
      call("call_1", "get_weather", { city: "Paris" }),
      call("call_2", "get_weather", { city: "Rome", days: 2 }),
    ],
    malformedToolCalls: 0,
  });
  // Text after the calls is kept (SGLang drops it), after the text before them.
  assert.equal(parse(`Before.\n${PARIS}\nAfter.`), {
    content: "Before.\n\nAfter.",
    tool_calls: [call("call_1", "get_weather", { city: "Paris" })],
    malformedToolCalls: 0,
  });
});

test("qwen3: a block that does not parse stays in the content verbatim and is counted", () => {
  const blocks = [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>', // bad JSON
    '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>', // no name
    '<tool_call>\n{"name": 7, "arguments": {}}\n</tool_call>', // name not a string
    '<tool_call>\n{"name": "", "arguments": {}}\n</tool_call>', // empty name
    '<tool_call>\n{"name": "get_weather"}\n</tool_call>', // no arguments
    '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>', // a string
    '<tool_call>\n{"name": "get_weather", "arguments": ["Paris"]}\n</tool_call>', // an array
    '<tool_call>\n{"name": "get_weather", "arguments": null}\n</tool_call>',
    '<tool_call>\n[{"name": "get_weather", "arguments": {}}]\n</tool_call>', // not an object
    "<tool_call></tool_call>",
  ];
  for (const block of blocks) {
    assert.equal(parse(`<think>\nr\n</think>\n\n${block}<|im_end|>`), {
      content: block,
      reasoning_content: "r",
      malformedToolCalls: 1,
    });
  }
  // Next to good calls: the good ones parse, the bad one keeps its place in the content.
  assert.equal(parse(`Checking.\n${blocks[0]}\n${PARIS}\n${blocks[1]}`), {
    content: `Checking.\n${blocks[0]}\n\n${blocks[1]}`,
    tool_calls: [call("call_1", "get_weather", { city: "Paris" })],
    malformedToolCalls: 2,
  });
});

test("qwen3: an opener that is opened again before it closes is malformed; the next one parses", () => {
  const text = `<tool_call>\n{"name": "get_wea\n${PARIS}`;
  assert.equal(parse(text), {
    content: '<tool_call>\n{"name": "get_wea',
    tool_calls: [call("call_1", "get_weather", { city: "Paris" })],
    malformedToolCalls: 1,
  });
});

test("qwen3: an unclosed <tool_call> at the end (cut by length) stays in the content, uncounted", () => {
  const cut = '<tool_call>\n{"name": "get_weather", "argu';
  assert.equal(parse(`<think>\nr\n</think>\n\n${cut}`), {
    content: cut,
    reasoning_content: "r",
    malformedToolCalls: 0,
  });
  assert.equal(parse(`${PARIS}\n${cut}`), {
    content: cut,
    tool_calls: [call("call_1", "get_weather", { city: "Paris" })],
    malformedToolCalls: 0,
  });
});

test("tool-call ids: call_ + 24 alphanumerics from the crypto RNG, fresh each time", () => {
  const ids = new Set<string>();
  for (let i = 0; i < 1000; i++) {
    const id = newToolCallId();
    assert.match(id, /^call_[A-Za-z0-9]{24}$/);
    ids.add(id);
  }
  assert.is(ids.size, 1000);
  const parsed = parseTagged(`${PARIS}\n${ROME}`, QWEN3_FORMAT);
  const [a, b] = parsed.tool_calls!.map((c) => c.id);
  assert.match(a!, /^call_[A-Za-z0-9]{24}$/);
  assert.ok(a !== b);
  // The qwen3 family's parseCompletion uses the same default.
  assert.match(selectFamily(qwen3()).parseCompletion(PARIS).tool_calls![0]!.id, /^call_[A-Za-z0-9]{24}$/);
});

test.run();
