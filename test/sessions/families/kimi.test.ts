// The kimi25 / kimi26 families on synthetic Kimi folders: settings (docs/models.md), the
// fixed K2.5 template's layout and FAMILIES' worked example, the pinned preserve_thinking
// (K2.5 through the fixed template, K2.6 through its own), drift classes with
// <|im_middle|> left out of the special set, the kimi_k2 parser against the template
// (the model's own call ids kept), and TITO loops through tool calls, user and system
// appends with no drift.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { PinnedKwargError } from "../../../sessions/errors.ts";
import { selectFamily, type AssistantTurn, type TitoFamily } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, renderOrThrow, type PromptContext } from "../../../sessions/prompt-builder.ts";
import { serverKwargs, TurnKwargs } from "../../../sessions/template-kwargs.ts";
import type { TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { counter, driftTypes, playTurn } from "./tito-loop.ts";
import { call } from "./family-fixtures.ts";
import { kimiFolder } from "./kimi-inkling-folders.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.kimi;

const k25Folder = kimiFolder({ model: "K2.5" });
const k26Folder = kimiFolder({ model: "K2.6" });
const k25 = selectFamily(k25Folder);
const k26 = selectFamily(k26Folder);
const ctxOf = (folder: TokenizerFolder, family: TitoFamily, extra: Record<string, unknown> = {}) =>
  promptContext(folder, family, { ...serverKwargs(family), ...extra });
const ctx25 = ctxOf(k25Folder, k25);
const ctx26 = ctxOf(k26Folder, k26);
const id = (token: string) => k25Folder.tokenId(token)!;
const IM_END = id("<|im_end|>");
const IM_MIDDLE = id("<|im_middle|>");
const render = (c: PromptContext, messages: ChatMessage[], addGenerationPrompt: boolean, kwargs = c.kwargs) =>
  renderOrThrow(c.renderer, messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools });

test("settings the table does not hold: drift splits at every special but <|im_middle|>; K2.6 may use the fixed template", () => {
  for (const family of [k25, k26]) {
    const expected = new Set(k25Folder.specialTokenIds);
    expected.delete(IM_MIDDLE);
    assert.equal(family.driftSpecialIds, expected, "the tokenizer's specials less <|im_middle|>");
  }
  assert.is(selectFamily(k26Folder, "kimi25").name, "kimi25", "K2.6 may also be rendered by the fixed template");
});

test("template layout: tool declaration, named headers, think block, calls section, tool result, prompt", () => {
  const messages: ChatMessage[] = [
    ...history,
    { role: "assistant", ...TWO_CALLS },
    { role: "tool", tool_call_id: "functions.get_weather:0", content: "sunny" },
    { role: "tool", tool_call_id: "functions.search:1", content: "3 results", name: "search" },
    { role: "user", content: "Thanks", name: "bob" },
  ];
  const text = render(ctx25, messages, true);
  assert.is(
    text,
    `<|im_system|>tool_declare<|im_middle|>${JSON.stringify(tools)}<|im_end|>` +
      "<|im_system|>system<|im_middle|>You are a weather bot.<|im_end|>" +
      "<|im_user|>user<|im_middle|>Weather in Paris, and search Rome?<|im_end|>" +
      "<|im_assistant|>assistant<|im_middle|><think>Two lookups needed.</think>Let me check both." +
      "<|tool_calls_section_begin|>" +
      '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city":"Paris","days":2}<|tool_call_end|>' +
      '<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{"query":"Rome ☀","filters":{"n":[1,2]}}<|tool_call_end|>' +
      "<|tool_calls_section_end|><|im_end|>" +
      "<|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\nsunny<|im_end|>" +
      "<|im_system|>search<|im_middle|>## Return of functions.search:1\n3 results<|im_end|>" +
      "<|im_user|>bob<|im_middle|>Thanks<|im_end|>" +
      "<|im_assistant|>assistant<|im_middle|><think>",
  );
  assert.ok(
    render(ctx25, history, true, { ...ctx25.kwargs, thinking: false }).endsWith(
      "<|im_assistant|>assistant<|im_middle|><think></think>",
    ),
  );
  assert.is(render(ctx26, messages, true), text, "the K2.6 stand-in renders alike");
});

test("preserve_thinking must be pinned: by default a plain answer blanks every earlier think block", () => {
  const answer: ChatMessage = { role: "assistant", content: "Sunny.", reasoning_content: "easy" };
  const before: ChatMessage[] = [...history, { role: "assistant", ...TWO_CALLS }, { role: "tool", content: "x" }];
  const after: ChatMessage[] = [...before, answer, { role: "user", content: "Thanks." }];
  for (const c of [ctx25, ctx26]) {
    assert.not.ok(render(c, after, false, {}).startsWith(render(c, before, false, {})), "default: not append-only");
    assert.ok(render(c, after, false, {}).includes("<think></think>Sunny."), "the answer's own reasoning is gone");
    assert.ok(render(c, after, false).startsWith(render(c, before, false)), "pinned: append-only");
    assert.ok(render(c, after, false).includes("<think>easy</think>Sunny."));
  }
  // The K2.5 folder's own template has no switch: even pinned, it is not append-only.
  const own = promptContext(k25Folder, { ...k25, template: undefined }, ctx25.kwargs);
  assert.not.ok(render(own, after, false).startsWith(render(own, before, false)));
  assert.throws(
    () => new TurnKwargs(k26, ctx26.kwargs).of({ preserve_thinking: false }),
    (e: unknown) => e instanceof PinnedKwargError,
  );
});

test("round trip: reasoning, content and two calls render, format and parse as one text, ids kept", () => {
  for (const c of [ctx25, ctx26]) {
    const prompt = render(c, history, true);
    const full = render(c, [...history, { role: "assistant", ...TWO_CALLS }], false);
    assert.ok(full.startsWith(prompt) && full.endsWith("<|im_end|>"));
    const generated = full.slice(prompt.length, -"<|im_end|>".length);
    assert.is(c.family.formatCompletion(TWO_CALLS, c.kwargs), generated);
    const parsed = c.family.parseCompletion(generated + "<|im_end|>", { tools, kwargs: c.kwargs });
    assert.equal(parsed, {
      content: "Let me check both.",
      reasoning_content: "Two lookups needed.",
      tool_calls: TWO_CALLS.tool_calls!.map((x) => ({
        id: x.id,
        type: "function",
        function: { name: x.function.name, arguments: JSON.stringify(x.function.arguments) },
      })),
      malformedToolCalls: 0,
    });
    const { malformedToolCalls, ...message } = parsed;
    void malformedToolCalls;
    assert.is(render(c, [...history, { role: "assistant", ...message }], false), full);
  }
});

test("round trip with thinking off: the prompt closes the think block, the output is content and calls", () => {
  const kwargs = { ...ctx25.kwargs, thinking: false };
  const turn: AssistantTurn = { content: "Checking.", tool_calls: [call("get_weather", { city: "Oslo" })] };
  const prompt = render(ctx25, history, true, kwargs);
  const withIds = { ...turn, tool_calls: [call("get_weather", { city: "Oslo" }, "functions.get_weather:0")] };
  const full = render(ctx25, [...history, { role: "assistant", ...withIds }], false, kwargs);
  const generated = full.slice(prompt.length, -"<|im_end|>".length);
  assert.is(k25.formatCompletion(turn, kwargs), generated, "an id-less call is functions.NAME:IDX");
  assert.is(generated.includes("</think>"), false);
  const parsed = k25.parseCompletion(generated, { kwargs });
  assert.equal(parsed, {
    content: "Checking.",
    tool_calls: [
      {
        id: "functions.get_weather:0",
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
      },
    ],
    malformedToolCalls: 0,
  });
});

test("parser: reasoning ends at </think> or the calls section; a length cut inside it is all reasoning", () => {
  const parse = (text: string) => k26.parseCompletion(text);
  assert.equal(parse("plan</think> Hi. <|im_end|>"), {
    content: " Hi. ",
    reasoning_content: "plan",
    malformedToolCalls: 0,
  });
  assert.equal(parse("<think>echoed</think>x").reasoning_content, "echoed");
  assert.equal(parse("still thinking, cut by the len"), {
    content: "",
    reasoning_content: "still thinking, cut by the len",
    malformedToolCalls: 0,
  });
  const direct = parse(
    "plan<|tool_calls_section_begin|><|tool_call_begin|> search:3 <|tool_call_argument_begin|> {} <|tool_call_end|><|tool_calls_section_end|>",
  );
  assert.equal(direct, {
    content: "",
    reasoning_content: "plan",
    tool_calls: [{ id: "search:3", type: "function", function: { name: "search", arguments: "{}" } }],
    malformedToolCalls: 0,
  });
  const dotted = parse(
    "r</think><|tool_calls_section_begin|><|tool_call_begin|>functions.fs.read-file:12<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>after",
  );
  assert.equal([dotted.tool_calls![0]!.function.name, dotted.content], ["fs.read-file", "after"]);
});

test("parser: malformed calls stay in the content and count; a cut-off one stays uncounted", () => {
  const parse = (text: string) => k25.parseCompletion(text);
  const good = '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city":"X"}<|tool_call_end|>';
  const badJson = "<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{oops<|tool_call_end|>";
  const badId = "<|tool_call_begin|>get weather<|tool_call_argument_begin|>{}<|tool_call_end|>";
  const notObject = "<|tool_call_begin|>functions.search:2<|tool_call_argument_begin|>[1]<|tool_call_end|>";
  const section = (...calls: string[]) => `<|tool_calls_section_begin|>${calls.join("")}<|tool_calls_section_end|>`;
  const mixed = parse(`r</think>A${section(good, badJson, badId, notObject)}`);
  assert.equal([mixed.tool_calls!.length, mixed.malformedToolCalls], [1, 3]);
  assert.is(mixed.content, `A${badJson}${badId}${notObject}`);
  const empty = parse(`r</think>A${section()}`);
  assert.equal([empty.tool_calls, empty.malformedToolCalls, empty.content], [undefined, 1, `A${section()}`]);
  const reopened = parse(`r</think>${section("<|tool_call_begin|>functions.x:0", good)}`);
  assert.equal([reopened.tool_calls!.length, reopened.malformedToolCalls], [1, 1]);
  assert.is(reopened.content, "<|tool_call_begin|>functions.x:0");
  // The length limit: the section (or the call) never closes.
  const cut = `<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{"query": "Ro`;
  const cutAfterOne = parse(`r</think>A<|tool_calls_section_begin|>${good}${cut}`);
  assert.equal(
    [cutAfterOne.tool_calls!.length, cutAfterOne.malformedToolCalls, cutAfterOne.content],
    [1, 0, `A${cut}`],
  );
  const cutFirst = parse(`r</think>A<|tool_calls_section_begin|>${cut}`);
  assert.equal(
    [cutFirst.tool_calls, cutFirst.malformedToolCalls, cutFirst.content],
    [undefined, 0, `A<|tool_calls_section_begin|>${cut}`],
  );
  const unclosedInClosed = parse(
    `r</think>${section("<|tool_call_begin|>functions.x:0<|tool_call_argument_begin|>{}")}`,
  );
  assert.equal(unclosedInClosed.malformedToolCalls, 1);
  // The model stopped with the section open: not a cut, so malformed.
  const stopped = parse(`r</think>A<|tool_calls_section_begin|>${good}${cut}<|im_end|>`);
  assert.equal([stopped.tool_calls!.length, stopped.malformedToolCalls, stopped.content], [1, 1, `A${cut}`]);
});

test("drift: <|im_middle|> splits nothing; text drift is classed by its turn, specials by count and type", () => {
  const canonical = render(ctx25, [...history, { role: "assistant", ...TWO_CALLS }], false);
  const compare = (actual: string) =>
    compareTrajectories(k25Folder, k25, k25Folder.encode(canonical), k25Folder.encode(actual)).map((m) => m.type);
  assert.equal(compare(canonical), []);
  assert.equal(compare(canonical.replace("Let me check both.", "Let me  check both.")), ["assistant_text"]);
  assert.equal(compare(canonical.replace('{"city":"Paris","days":2}', '{"city": "Paris", "days": 2}')), [
    "assistant_text",
  ]);
  assert.equal(compare(canonical.replace("Weather in Paris", "Weather in Oslo")), ["non_assistant_text"]);
  assert.equal(
    compare(canonical.replace("<|im_user|>user<|im_middle|>", "<|im_user|>user:")),
    ["non_assistant_text"],
    "<|im_middle|> is only text of its segment",
  );
  assert.equal(compare(canonical.replace("<|im_user|>", "<|im_system|>")), ["special_token_type"]);
  assert.equal(compare(canonical.replace("<|tool_calls_section_end|>", "")), ["special_token_count"]);
  const special = kimiFolder({ model: "K2.6", specialThink: true });
  const fam = selectFamily(special);
  const types = compareTrajectories(
    special,
    fam,
    special.encode(canonical),
    special.encode(canonical.replace("</think>Let", "</think> Let").replace("Two lookups", "Two  lookups")),
  ).map((m) => m.type);
  assert.equal(types, ["assistant_text", "assistant_text"], "after special think tags the text is still the model's");
});

test("FAMILIES' worked example: nothing inserted after <|im_end|>; the tool increment and prompt", () => {
  const t = new Trajectory("kimi-example");
  const turn: AssistantTurn = { content: "", tool_calls: [call("get_weather", { city: "Paris" })] };
  const first = playTurn(ctx25, t, history, turn, "<|im_end|>", tools, counter());
  assert.is(first.completionIds[first.completionIds.length - 1], IM_END);
  const callId = (first.message.tool_calls as Array<{ id: string }>)[0]!.id;
  assert.is(callId, "functions.get_weather:0", "the model's own id");
  const request = [...t.messages, { role: "tool", tool_call_id: callId, content: "sunny" }];
  const plan = planPrompt(ctx25, t, request, tools);
  const increment = Array.from(plan.promptIds).slice(t.currentIds.length);
  assert.equal(Array.from(plan.promptIds).slice(0, t.currentIds.length), [...t.currentIds]);
  assert.is(
    k25Folder.decode(increment),
    "<|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\nsunny<|im_end|><|im_assistant|>assistant<|im_middle|><think>",
  );
});

for (const [name, c] of [
  ["kimi25", ctx25],
  ["kimi26", ctx26],
] as const)
  test(`${name} TITO loop: parallel calls, tool run, user and system appends; prompts are fresh renders, no drift`, () => {
    const t = new Trajectory(name);
    const newId = counter();
    const stop = "<|im_end|>";
    const r1 = history;
    const first = playTurn(
      c,
      t,
      r1,
      { ...TWO_CALLS, tool_calls: TWO_CALLS.tool_calls!.map(({ id: _, ...x }) => x) },
      stop,
      tools,
      newId,
    );
    const [c1, c2] = first.message.tool_calls as Array<{ id: string }>;
    assert.equal([c1!.id, c2!.id], ["functions.get_weather:0", "functions.search:1"]);
    const r2: ChatMessage[] = [
      ...r1,
      first.message,
      { role: "tool", tool_call_id: c1!.id, content: "sunny" },
      { role: "tool", tool_call_id: c2!.id, content: "3 results" },
    ];
    const second = playTurn(
      c,
      t,
      r2,
      { content: "Paris is sunny.", reasoning_content: "Summarize." },
      stop,
      tools,
      newId,
    );
    const r3: ChatMessage[] = [...r2, second.message, { role: "user", content: "And Rome tomorrow?" }];
    const third = playTurn(
      c,
      t,
      r3,
      { content: "", reasoning_content: "One call.", tool_calls: [call("get_weather", { city: "Rome", days: 1 })] },
      stop,
      tools,
      newId,
    );
    const r4: ChatMessage[] = [
      ...r3,
      third.message,
      { role: "tool", tool_call_id: (third.message.tool_calls as Array<{ id: string }>)[0]!.id, content: "rain" },
      { role: "system", content: "Answer in one line." },
      { role: "assistant", content: "(injected note)" },
      { role: "user", content: "Summary?" },
    ];
    const fourth = playTurn(c, t, r4, { content: "Rain in Rome.", reasoning_content: "Wrap up." }, stop, tools, newId);
    for (const [played, request] of [
      [first, r1],
      [second, r2],
      [third, r3],
      [fourth, r4],
    ] as const)
      assert.equal(Array.from(played.promptIds), c.folder.encode(render(c, request, true)));
    assert.equal(driftTypes(c, t), []);
  });

test.run();
