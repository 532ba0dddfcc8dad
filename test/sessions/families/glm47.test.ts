// The glm47 family (GLM-4.7 / GLM-5.x) on a synthetic folder with a GLM-4.7-format
// template: its settings and boundary drop (docs/models.md), drift classes, the pinned
// clear_thinking, the completion parser against the template, and a TITO loop through
// tool calls, a user append and a system append after a failed call, down to the sample.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { TokenizationError } from "../../../sessions/errors.ts";
import { selectFamily, type AssistantTurn } from "../../../sessions/families/index.ts";
import { buildSample } from "../../../sessions/journal/samples.ts";
import { promptContext } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { glm47Folder } from "./glm-minimax-folders.ts";
import { GLM47_LOOP } from "./family-table.ts";
import { counter, playLoop } from "./tito-loop.ts";
import { call } from "./family-fixtures.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.glm47;

const folder = glm47Folder();
const family = selectFamily(folder);
const id = (token: string) => folder.tokenId(token)!;
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const render = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs = ctx.kwargs) =>
  ctx.renderer.render(messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools });

test("clear_thinking must be pinned false: by default a new user turn rewrites earlier reasoning", () => {
  const a1: ChatMessage = { role: "assistant", content: "Sunny.", reasoning_content: "easy" };
  const before: ChatMessage[] = [...history, a1];
  const after: ChatMessage[] = [...before, { role: "user", content: "Thanks." }];
  assert.not.ok(render(after, false, {}).startsWith(render(before, false, {})), "default: not append-only");
  assert.ok(render(after, false).startsWith(render(before, false)), "pinned: append-only");
  assert.ok(render(after, false).includes("<think>easy</think>Sunny."));
});

test("drift: <|user|> where <|observation|> belongs is a type error; text drift is classed by its turn", () => {
  const canonical =
    "[gMASK]<sop><|user|>hi<|assistant|><think>r</think>A<tool_call>f</tool_call><|observation|><tool_response>x</tool_response><|assistant|></think>B";
  const compare = (actual: string) =>
    compareTrajectories(folder, family, folder.encode(canonical), folder.encode(actual)).map((m) => m.type);
  assert.equal(compare(canonical + "<|user|>"), [], "the stop token at the tail is trailing");
  assert.equal(compare(canonical.replace("<|observation|>", "<|user|>")), ["special_token_type"]);
  assert.equal(compare(canonical.replace("<think>r</think>A", "<think>r</think>  A")), ["assistant_text"]);
  assert.equal(compare(canonical.replace("hi", "ho")), ["non_assistant_text"]);
  assert.equal(compare(canonical.replace("<tool_response>x", "<tool_response>y")), ["non_assistant_text"]);
  assert.equal(compare(canonical.replace("<|observation|>", "")), ["special_token_count"]);
});

test("drift: with <think>/</think> flagged special, the text after them is still the assistant's", () => {
  const special = glm47Folder({ specialThink: true });
  const fam = selectFamily(special);
  const canonical = "[gMASK]<sop><|user|>hi<|assistant|><think>r</think>A<|user|>x";
  const actual = "[gMASK]<sop><|user|>hi<|assistant|><think>r </think>A.<|user|>x";
  const types = compareTrajectories(special, fam, special.encode(canonical), special.encode(actual)).map((m) => m.type);
  assert.equal(types, ["assistant_text", "assistant_text"]);
});

test("round trip: reasoning, content and two typed calls render, format and parse as one text", () => {
  const message: ChatMessage = { role: "assistant", ...TWO_CALLS };
  const prompt = render(history, true);
  const full = render([...history, message], false);
  assert.ok(full.startsWith(prompt) && prompt.endsWith("<|assistant|><think>"));
  const generated = full.slice(prompt.length);
  assert.is(
    generated,
    "Two lookups needed.</think>Let me check both." +
      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call>" +
      '<tool_call>search<arg_key>query</arg_key><arg_value>Rome 42</arg_value><arg_key>filters</arg_key><arg_value>{"lang": "it", "n": 3}</arg_value>' +
      '<arg_key>tags</arg_key><arg_value>["a", "b"]</arg_value><arg_key>exact</arg_key><arg_value>true</arg_value></tool_call>',
  );
  assert.is(family.formatCompletion(TWO_CALLS, ctx.kwargs), generated);
  const parsed = family.parseCompletion(generated + "<|observation|>", { tools, kwargs: ctx.kwargs, newId: counter() });
  assert.equal(parsed, {
    content: "Let me check both.",
    reasoning_content: "Two lookups needed.",
    tool_calls: TWO_CALLS.tool_calls!.map((c, i) => ({
      id: `call_${i + 1}`,
      type: "function",
      function: { name: c.function.name, arguments: JSON.stringify(c.function.arguments) },
    })),
    malformedToolCalls: 0,
  });
});

test("round trip with thinking off: the prompt closes the think block, the output is content and calls", () => {
  const kwargs = { ...ctx.kwargs, enable_thinking: false };
  const turn: AssistantTurn = { content: "Checking.", tool_calls: [call("get_weather", { city: "Oslo" })] };
  const prompt = render(history, true, kwargs);
  const full = render([...history, { role: "assistant", ...turn }], false, kwargs);
  assert.ok(prompt.endsWith("<|assistant|></think>") && full.startsWith(prompt));
  const generated = full.slice(prompt.length);
  assert.is(family.formatCompletion(turn, kwargs), generated);
  const parsed = family.parseCompletion(generated + "<|observation|>", { tools, kwargs, newId: counter() });
  assert.is(parsed.reasoning_content, undefined);
  assert.is(parsed.content, "Checking.");
  assert.equal(parsed.tool_calls![0]!.function, { name: "get_weather", arguments: '{"city":"Oslo"}' });
});

test("parser: reasoning ends at </think> or a first <tool_call>; a length cut inside reasoning is all reasoning", () => {
  const parse = (text: string) => family.parseCompletion(text, { tools, newId: counter() });
  assert.equal(parse("  plan  </think>  Hi.  <|user|>"), {
    content: "Hi.",
    reasoning_content: "plan",
    malformedToolCalls: 0,
  });
  const direct = parse("plan<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value></tool_call>");
  assert.is(direct.reasoning_content, "plan");
  assert.is(direct.tool_calls!.length, 1);
  assert.equal(parse("still thinking, cut by the len"), {
    content: "",
    reasoning_content: "still thinking, cut by the len",
    malformedToolCalls: 0,
  });
  assert.equal(parse("<think>opened</think>x").reasoning_content, "opened");
  // All text outside the calls is content, trimmed: before, between and after.
  const spread = parse(
    "r</think>A <tool_call>get_weather<arg_key>city</arg_key>\n<arg_value>X</arg_value></tool_call> B <tool_call>get_weather</tool_call> C",
  );
  assert.is(spread.content, "A  B  C");
  assert.equal(
    spread.tool_calls!.map((c) => c.function.arguments),
    ['{"city":"X"}', "{}"],
  );
});

test("parser: malformed and undeclared calls stay in the content and count; an unclosed one only stays", () => {
  const parse = (text: string) => family.parseCompletion(text, { tools, newId: counter() });
  const junk = "<tool_call>get_weather junk<arg_key>city</arg_key></tool_call>";
  assert.equal(parse(`r</think>${junk}`), { content: junk, reasoning_content: "r", malformedToolCalls: 1 });
  const unnamed = "<tool_call><arg_key>city</arg_key><arg_value>X</arg_value></tool_call>";
  assert.is(parse(`r</think>${unnamed}`).malformedToolCalls, 1);
  const undeclared = "<tool_call>launch<arg_key>what</arg_key><arg_value>rocket</arg_value></tool_call>";
  const good = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>X</arg_value></tool_call>";
  const mixed = parse(`r</think>${undeclared}${good}`);
  assert.is(mixed.content, undeclared);
  assert.is(mixed.malformedToolCalls, 1);
  assert.is(mixed.tool_calls!.length, 1);
  // Without declared tools every well-formed call counts.
  assert.is(family.parseCompletion(`r</think>${undeclared}`).tool_calls![0]!.function.name, "launch");
  const cut = parse(`r</think>Ok.${good}<tool_call>get_weather<arg_key>ci`);
  assert.equal(
    [cut.content, cut.malformedToolCalls, cut.tool_calls!.length],
    ["Ok.<tool_call>get_weather<arg_key>ci", 0, 1],
  );
  const reopened = parse(`r</think><tool_call>get_weather${good}`);
  assert.equal(
    [reopened.content, reopened.malformedToolCalls, reopened.tool_calls!.length],
    ["<tool_call>get_weather", 1, 1],
  );
});

test("parser: values typed by the schema: strings raw, the rest JSON, then Python literals", () => {
  const args = (body: string) =>
    JSON.parse(
      family.parseCompletion(`r</think><tool_call>search${body}</tool_call>`, { tools }).tool_calls![0]!.function
        .arguments,
    );
  const kv = (k: string, v: string) => `<arg_key>${k}</arg_key><arg_value>${v}</arg_value>`;
  assert.equal(args(kv("query", "123") + kv("tags", '["x"]')), { query: "123", tags: ["x"] });
  assert.equal(args(kv("filters", "{'a': True, 'b': None}") + kv("exact", "false")), {
    filters: { a: true, b: null },
    exact: false,
  });
  assert.equal(args(kv("filters", "not json")), { filters: "not json" });
  assert.equal(
    args(kv("extra", "7") + kv("other", "plain")),
    { extra: 7, other: "plain" },
    "undeclared: JSON, else text",
  );
});

/** GLM-4.7's loop from the table (families.test.ts checks its prompts and drift). */
const playGlmLoop = () => playLoop(ctx, "glm", GLM47_LOOP());

test("TITO loop: tool run, user append, system append after a failed call; prompts extend the checkpoints", () => {
  const { turns } = playGlmLoop();
  // Each prompt: the previous checkpoint minus its stop id, then the increment's own opener.
  const openers = [undefined, "<|observation|>", "<|user|>", "<|system|>"];
  turns.forEach((turn, k) => {
    if (k === 0) return;
    const previous = turns[k - 1]!;
    const end = previous.promptIds.length + previous.completionIds.length;
    assert.equal(turn.promptIds.slice(0, end - 1), [...previous.promptIds, ...previous.completionIds].slice(0, -1));
    assert.is(turn.promptIds[end - 1], id(openers[k]!), `turn ${k}'s opener`);
  });
  // Without the trim allowance the system append's prompt is refused.
  const replay = new Trajectory("replay");
  for (let k = 0; k < 3; k++)
    replay.restore({ promptIds: turns[k]!.promptIds, completionIds: turns[k]!.completionIds, messages: [] });
  const input = { promptIds: turns[3]!.promptIds, completionIds: turns[3]!.completionIds, messages: [] };
  assert.throws(
    () => replay.verify(input, 0),
    (e: unknown) => e instanceof TokenizationError,
  );
  replay.verify(input, 1);
});

test("TITO loop sample: a stop id the next prompt wrote again is trained on, a replaced one is not", () => {
  const { t, turns } = playGlmLoop();
  const sample = buildSample(
    t.id,
    t.checkpoints,
    turns.map((p) => p.record),
    undefined,
    family.maxTrimTokens,
  );
  assert.equal(sample.tokens, [...t.currentIds]);
  const generated = turns.reduce((n, p) => n + p.completionIds.length, 0);
  // Turn 2 (index) stopped at <|observation|> but turn 3's prompt put <|system|> there.
  assert.is(
    [...sample.lossMask].reduce((a, b) => a + b, 0),
    generated - 1,
  );
  const third = sample.turns[2]!;
  assert.is(third.completion_end, t.checkpoints.lengthOf(2) - 1);
  assert.is(sample.turns[3]!.prompt_start, third.completion_end);
  assert.is(sample.turns[1]!.completion_end, t.checkpoints.lengthOf(1), "<|user|> written again: kept");
});

test.run();
