// The inkling family on a synthetic Inkling folder (control tokens at their real ids):
// settings and the comparator's special set (docs/models.md), the fixed template's cases
// (no empty text block, thinking → call → end-sampling order, an empty assistant renders
// nothing, the one-time effort block, tool names from earlier calls), the inkling parser
// against the template, and why later turns render against the real history. The TITO
// loops are in inkling-loop.test.ts.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { TemplateRenderError, TokenizationError } from "../../../sessions/errors.ts";
import { detectFamily, selectFamily, type AssistantTurn } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { counter, playTurn } from "./tito-loop.ts";
import { call } from "./family-fixtures.ts";
import { gptossInklingFolder, inklingFolder } from "./kimi-inkling-folders.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.inkling;

const folder = inklingFolder();
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const STOP = "<|content_model_end_sampling|>";
const render = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs = ctx.kwargs, withTools = tools) =>
  renderOrThrow(ctx.renderer, messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools: withTools });

const EFFORT = "<|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|>";
const blocks = (...parts: string[]) => parts.join("");

test("the gpt-oss BPE with Inkling's control tokens laid over it (its TITO loop is in the table)", () => {
  const real = gptossInklingFolder();
  assert.is(detectFamily(real), "inkling");
  assert.equal(selectFamily(real).driftSpecialIds, new Set([200000, 200001, 200002, 200003]));
  assert.equal(real.encode("<|message_model|>"), [200001]);
  assert.ok(real.encode("Weather in Paris").length < "Weather in Paris".length, "real BPE merges");
});

test("template: tool declaration, effort block before the first non-system message, blocks per message", () => {
  const messages: ChatMessage[] = [
    ...history,
    { role: "assistant", ...TWO_CALLS },
    { role: "tool", tool_call_id: "call_a", content: "sunny" },
    { role: "tool", tool_call_id: "call_b", content: "3 results", name: "web" },
    {
      role: "user",
      content: [
        { type: "text", text: "Thanks" },
        { type: "text", text: "!" },
      ],
    },
  ];
  assert.is(
    render(messages, true),
    blocks(
      "<|message_system|>tool_declare<|content_xml|>",
      '[{"description":"Weather of a city","name":"get_weather","parameters":{"properties":{"City":{"type":"string"},"days":{"type":"integer"}},"type":"object"},"type":"function"},',
      '{"description":"","name":"search","parameters":{"type":"object"},"type":"function"}]<|end_message|>',
      "<|message_system|><|content_text|>You are a weather bot.<|end_message|>",
      EFFORT,
      "<|message_user|><|content_text|>Weather in Paris, and search Rome?<|end_message|>",
      "<|message_model|><|content_thinking|>Two lookups needed.<|end_message|>",
      "<|message_model|><|content_text|>Let me check both.<|end_message|>",
      '<|message_model|>get_weather<|content_invoke_tool_json|>{"name":"get_weather","args":{"City":"Paris","days":2}}<|end_message|>',
      '<|message_model|>search<|content_invoke_tool_json|>{"name":"search","args":{"filters":{"_":true,"z":[1,{"a":null,"b":2}]},"query":"Rome ☀"}}<|end_message|>',
      STOP,
      "<|message_tool|>get_weather<|content_text|>sunny<|end_message|>",
      "<|message_tool|>web<|content_text|>3 results<|end_message|>",
      // Text parts joined by " ", as SGLang prepares them for a template that does not loop over message.content.
      "<|message_user|><|content_text|>Thanks !<|end_message|>",
      "<|message_model|>",
    ),
  );
  const noTools = (m: ChatMessage[], prompt = false, kwargs = ctx.kwargs) => render(m, prompt, kwargs, []);
  const user: ChatMessage = { role: "user", content: "hi" };
  assert.is(noTools([user]), blocks(EFFORT, "<|message_user|><|content_text|>hi<|end_message|>"));
  const twoSystems: ChatMessage[] = [history[0]!, { role: "system", content: "Be brief." }];
  assert.ok(noTools([...twoSystems, user]).includes(`Be brief.<|end_message|>${EFFORT}<|message_user|>`));
  assert.ok(noTools(twoSystems, true).endsWith(`Be brief.<|end_message|>${EFFORT}<|message_model|>`), "all system");
  assert.ok(
    noTools([user], false, { reasoning_effort: 0.5 }).startsWith(
      "<|message_system|><|content_text|>Thinking effort level: 0.5<|end_message|>",
    ),
  );
  assert.throws(
    () => noTools([user], false, { reasoning_effort: "high" }),
    (e: unknown) => e instanceof TemplateRenderError,
  );
  assert.throws(
    () => noTools([{ role: "developer", content: "x" }]),
    (e: unknown) => e instanceof TemplateRenderError,
  );
});

test("template: a call-only turn has no empty text block; an empty assistant renders nothing; no thinking dropped", () => {
  const only = render(
    [...history, { role: "assistant", content: "", reasoning_content: "r", tool_calls: [call("search", {}, "s1")] }],
    false,
    ctx.kwargs,
    [],
  );
  assert.ok(
    only.endsWith(
      '<|message_model|><|content_thinking|>r<|end_message|><|message_model|>search<|content_invoke_tool_json|>{"name":"search","args":{}}<|end_message|>' +
        STOP,
    ),
  );
  assert.not.ok(only.includes("<|content_text|><|end_message|>"));
  const base = render(history, false, ctx.kwargs, []);
  assert.is(render([...history, { role: "assistant", content: "" }], false, ctx.kwargs, []), base);
  const both = render([...history, { role: "assistant", content: "A", reasoning_content: "R" }], false, ctx.kwargs, []);
  assert.ok(
    both.endsWith(
      "<|message_model|><|content_thinking|>R<|end_message|><|message_model|><|content_text|>A<|end_message|>" + STOP,
    ),
  );
  const later = [
    ...history,
    { role: "assistant", content: "A", reasoning_content: "R" },
    { role: "user", content: "more" },
  ];
  assert.ok(render(later, false, ctx.kwargs, []).startsWith(both), "a new user turn keeps the reasoning");
});

test("comparator: only role tokens split; user/system/tool text drift is hard, assistant text soft", () => {
  const messages: ChatMessage[] = [
    ...history,
    { role: "assistant", ...TWO_CALLS },
    { role: "tool", tool_call_id: "call_a", content: "sunny" },
    { role: "system", content: "Be brief." },
  ];
  const canonical = render(messages, false);
  const compare = (actual: string) =>
    compareTrajectories(folder, family, folder.encode(canonical), folder.encode(actual)).map((m) => m.type);
  assert.equal(compare(canonical), []);
  assert.equal(compare(canonical.replace("Let me check", "Let me  check")), ["assistant_text"]);
  assert.equal(compare(canonical.replace('"City":"Paris"', '"City": "Paris"')), ["assistant_text"]);
  assert.equal(compare(canonical.replace("sunny", "rainy")), ["non_assistant_text"], "tool text");
  assert.equal(compare(canonical.replace("Be brief.", "Be short.")), ["non_assistant_text"], "system text");
  assert.equal(compare(canonical.replace("Weather in Paris", "Weather in Oslo")), ["non_assistant_text"], "user text");
  assert.equal(
    compare(canonical.replace(`${STOP}<|message_tool|>`, "<|message_tool|>")),
    ["assistant_text"],
    "a content token is text of its segment",
  );
  assert.equal(compare(canonical.replace("<|message_tool|>", "<|message_user|>")), ["special_token_type"]);
  assert.equal(compare(canonical.replace("<|message_tool|>get_weather", "get_weather")), ["special_token_count"]);
});

test("round trip: the completion is the turn's blocks less the prompt's opener; it parses back", () => {
  const prompt = render(history, true);
  const full = render([...history, { role: "assistant", ...TWO_CALLS }], false);
  assert.ok(prompt.endsWith("<|message_model|>") && full.startsWith(prompt) && full.endsWith(STOP));
  const generated = full.slice(prompt.length, -STOP.length);
  assert.ok(generated.startsWith("<|content_thinking|>Two lookups"));
  assert.is(family.formatCompletion(TWO_CALLS, ctx.kwargs), generated);
  const parsed = family.parseCompletion(generated + STOP, { tools, kwargs: ctx.kwargs, newId: counter() });
  assert.equal(parsed, {
    content: "Let me check both.",
    reasoning_content: "Two lookups needed.",
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"City":"Paris","days":2}' } },
      {
        id: "call_2",
        type: "function",
        function: { name: "search", arguments: '{"filters":{"_":true,"z":[1,{"a":null,"b":2}]},"query":"Rome ☀"}' },
      },
    ],
    malformedToolCalls: 0,
  });
  const { malformedToolCalls, ...message } = parsed;
  void malformedToolCalls;
  assert.is(render([...history, { role: "assistant", ...message }], false), full, "the parsed message renders alike");
  // Each block kind can come first: the header the prompt opened is the model's to write.
  for (const turn of [
    { content: "Hi." },
    { content: "", tool_calls: [call("search", { q: 1 }, "x")] },
    { content: "", reasoning_content: "only thinking" },
  ] as AssistantTurn[]) {
    const rendered = render([...history, { role: "assistant", ...turn }], false).slice(prompt.length, -STOP.length);
    assert.is(family.formatCompletion(turn), rendered);
    const back = family.parseCompletion(rendered, { newId: () => "x" });
    assert.equal(
      [back.content, back.reasoning_content, back.tool_calls?.length],
      [turn.content, turn.reasoning_content, turn.tool_calls?.length],
    );
  }
  assert.is(family.formatCompletion({ content: "" }), "", "an empty turn: the model stops at once");
});

test("parser: header must equal the payload's name, args must be an object; undeclared tools still count", () => {
  const parse = (text: string) => family.parseCompletion(text, { tools, newId: counter() });
  const invoke = (header: string, payload: string) =>
    `<|message_model|>${header}<|content_invoke_tool_json|>${payload}<|end_message|>`;
  const good = invoke("search", '{"name":"search","args":{"q":1}}');
  const mismatch = invoke("search", '{"name":"get_weather","args":{}}');
  const array = invoke("search", '{"name":"search","args":[1]}');
  const broken = invoke("search", '{"name":"search","args":');
  const text = `<|content_text|>A<|end_message|>${good}${mismatch}${array}${broken}${invoke("launch", '{"name":"launch","args":{}}')}`;
  const parsed = parse(text + STOP);
  assert.equal(
    parsed.tool_calls!.map((c) => [c.function.name, c.function.arguments]),
    [
      ["search", '{"q":1}'],
      ["launch", "{}"],
    ],
  );
  assert.is(parsed.malformedToolCalls, 3);
  assert.is(parsed.content, `A${mismatch}${array}${broken}`);
  const headless = parse(`<|content_invoke_tool_json|> {"name":"search","args":{}} <|end_message|>`);
  assert.equal([headless.tool_calls!.length, headless.content], [1, ""], "no header: nothing to check");
  const first = parse(`search<|content_invoke_tool_json|>{"name":"get_weather","args":{}}<|end_message|>`);
  assert.equal(
    [first.tool_calls, first.malformedToolCalls],
    [undefined, 1],
    "the prompt's opener heads the first block",
  );
  assert.is(first.content, `search<|content_invoke_tool_json|>{"name":"get_weather","args":{}}<|end_message|>`);
});

test("parser: blocks route by kind; stray text is content; a length cut keeps what it has", () => {
  const parse = (text: string) => family.parseCompletion(text, { newId: counter() });
  assert.equal(
    parse(
      "<|content_thinking|>a<|end_message|><|message_model|><|content_thinking|>b<|end_message|>" +
        "<|message_model|><|content_text|>quote <|message_model|> and <|message_user|>x<|end_message|> stray" +
        `<|message_model|><|content_xml|><x/><|end_message|>${STOP}`,
    ),
    { content: "quote <|message_model|> and x stray<x/>", reasoning_content: "ab", malformedToolCalls: 0 },
  );
  assert.equal(parse("<|content_thinking|>cut in the midd"), {
    content: "",
    reasoning_content: "cut in the midd",
    malformedToolCalls: 0,
  });
  const cutCall = `<|message_model|>search<|content_invoke_tool_json|>{"name":"sea`;
  assert.equal(parse(`<|content_text|>A<|end_message|>${cutCall}`), {
    content: `A${cutCall}`,
    malformedToolCalls: 0,
  });
  assert.equal(
    parse(`<|content_text|>A<|end_message|>${cutCall}${STOP}`),
    {
      content: `A${cutCall}`,
      malformedToolCalls: 1,
    },
    "the model stopped inside the call: malformed, not cut",
  );
  assert.equal(parse(`<|content_text|>A<|end_message|><|message_model|>sea`).content, "A<|message_model|>sea");
  const closedOther = parse(`<|message_model|>search<|content_invoke_tool_json|>{}${STOP}`);
  assert.equal(
    [closedOther.malformedToolCalls, closedOther.content],
    [1, "<|message_model|>search<|content_invoke_tool_json|>{}"],
  );
  assert.equal(parse(STOP), { content: "", malformedToolCalls: 0 });
});

test("FAMILIES' worked example: the completion tail and the tool increment", () => {
  const t = new Trajectory("inkling-example");
  const turn: AssistantTurn = { content: "", tool_calls: [call("get_weather", { city: "Paris" })] };
  const first = playTurn(ctx, t, history, turn, STOP, undefined, counter());
  assert.ok(
    folder
      .decode([...first.promptIds, ...first.completionIds])
      .endsWith(
        '<|message_model|>get_weather<|content_invoke_tool_json|>{"name":"get_weather","args":{"city":"Paris"}}<|end_message|>' +
          STOP,
      ),
  );
  assert.is(folder.decode(Array.from(first.promptIds).slice(-1)), "<|message_model|>", "the prompt wrote the opener");
  const callId = (first.message.tool_calls as Array<{ id: string }>)[0]!.id;
  const plan = planPrompt(ctx, t, [...t.messages, { role: "tool", tool_call_id: callId, content: "sunny" }]);
  assert.equal(Array.from(plan.promptIds).slice(0, t.currentIds.length), [...t.currentIds]);
  assert.is(
    folder.decode(Array.from(plan.promptIds).slice(t.currentIds.length)),
    "<|message_tool|>get_weather<|content_text|>sunny<|end_message|><|message_model|>",
    "the tool's name comes from the call its id answers",
  );
});

test("why history increments: a system message appended after a lone dummy system has no common prefix", () => {
  const segments = promptContext(folder, { ...family, increment: "segments" }, ctx.kwargs);
  const t = new Trajectory("segments");
  playTurn(segments, t, history, { content: "Hi." }, STOP, undefined, counter());
  // [dummy system] renders "dummy, effort"; [dummy system, appended system] renders
  // "dummy, appended, effort": the second does not extend the first.
  assert.throws(
    () => planPrompt(segments, t, [...t.messages, { role: "system", content: "Be brief." }]),
    (e: unknown) => e instanceof TokenizationError,
  );
  const plan = planPrompt(ctx, t, [...t.messages, { role: "system", content: "Be brief." }]);
  assert.is(
    folder.decode(Array.from(plan.promptIds).slice(t.currentIds.length)),
    "<|message_system|><|content_text|>Be brief.<|end_message|><|message_model|>",
  );
});

test.run();
