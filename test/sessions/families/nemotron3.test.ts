// The nemotron3 family (NVIDIA Nemotron 3, HF native template) on a synthetic folder whose
// template is written in Nemotron's format (docs/models.md) with truncate_history_thinking:
// detection and settings, the assistant start with its newline, the pinned kwarg, the
// worked example, the nemotron_3 / qwen3_coder parser (the reasoning keeps its trailing
// newline) against the template, drift classes, and a TITO loop with a system append.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { SessionConfigError } from "../../../sessions/errors.ts";
import { detectFamily, selectFamily, type AssistantTurn } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { nemotron3Folder } from "./chatml-folders.ts";
import { counter, driftTypes, playTurn } from "./glm-minimax-loop.ts";

const folder = nemotron3Folder();
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const IM_START = folder.tokenId("<|im_start|>")!;
const IM_END = folder.tokenId("<|im_end|>")!;
const NL = folder.encode("\n")[0]!;
const render = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs = ctx.kwargs) =>
  renderOrThrow(ctx.renderer, messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools });

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } },
    },
  },
];
const call = (city: string, days?: number) => ({
  type: "function" as const,
  function: { name: "get_weather", arguments: days === undefined ? { city } : { city, days } },
});
const TWO_CALLS: AssistantTurn = {
  content: "Let me check.",
  reasoning_content: "Two lookups.\n",
  tool_calls: [call("Paris", 2), call("Rome")],
};
const history: ChatMessage[] = [
  { role: "system", content: "You are a weather bot." },
  { role: "user", content: "Weather in Paris and Rome?" },
];

test("settings: detected by truncate_history_thinking; native template; assistant start includes the newline", () => {
  assert.is(detectFamily(folder), "nemotron3");
  assert.is(family.name, "nemotron3");
  assert.is(family.template, undefined);
  assert.is(family.maxTrimTokens, 0);
  assert.equal([...family.trailingTokenIds], [NL]);
  assert.equal(family.appendRoles, ["tool", "user", "system", "assistant"]);
  assert.equal(family.pinnedKwargs, { truncate_history_thinking: false });
  assert.equal(family.sglangParsers, { reasoning: "nemotron_3", toolCall: "qwen3_coder" });
  assert.equal(family.stopTokens, ["<|im_end|>"]);
  assert.equal(family.boundaryIds([1, IM_END]), [NL]);
  assert.equal(family.boundaryIds([IM_END, 1]), []);
  assert.ok(family.isAssistantSegment(IM_START, "assistant\n<think>\n"));
  assert.not.ok(family.isAssistantSegment(IM_START, "assistant"), "the start string has the newline");
  assert.not.ok(family.isAssistantSegment(IM_START, "user\n"));
  assert.throws(
    () => selectFamily(nemotron3Folder("<|im_start|>"), "nemotron3"),
    (e: unknown) => e instanceof SessionConfigError && /<\|im_start\|>/.test(String(e)),
  );
});

test("truncate_history_thinking must be pinned false: by default earlier think blocks are emptied", () => {
  const before: ChatMessage[] = [...history, { role: "assistant", content: "Sunny.", reasoning_content: "easy\n" }];
  const after: ChatMessage[] = [...before, { role: "user", content: "Thanks." }];
  assert.not.ok(render(after, false, {}).startsWith(render(before, false, {})), "default: not append-only");
  assert.ok(render(after, false, {}).includes("<|im_start|>assistant\n<think></think>Sunny.<|im_end|>\n"));
  assert.ok(render(after, false).startsWith(render(before, false)), "pinned: append-only");
  assert.ok(render(after, false).includes("<|im_start|>assistant\n<think>\neasy\n</think>Sunny.<|im_end|>\n"));
});

test("worked example: completion tail </tool_call>\\n<|im_end|>, the newline put back, then the tool increment", () => {
  const t = new Trajectory("nemo-example");
  const first = playTurn(
    ctx,
    t,
    history,
    { content: "", reasoning_content: "Look.\n", tool_calls: [call("Paris")] },
    "<|im_end|>",
    tools,
    counter(),
  );
  assert.ok(folder.decode(first.completionIds).endsWith("</tool_call>\n<|im_end|>"));
  const id = (first.message.tool_calls as Array<{ id: string }>)[0]!.id;
  const plan = planPrompt(
    ctx,
    t,
    [...history, first.message, { role: "tool", tool_call_id: id, content: "sunny" }],
    tools,
  );
  const base = t.currentIds.length;
  assert.equal(plan.promptIds.slice(0, base), [...t.currentIds]);
  assert.is(plan.promptIds[base], NL);
  assert.is(
    folder.decode(plan.promptIds.slice(base + 1)),
    "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n<think>\n",
  );
});

test("round trip: the reasoning keeps its trailing newline (nemotron_3), which renders the model's text back", () => {
  const prompt = render(history, true);
  assert.ok(prompt.endsWith("<|im_start|>assistant\n<think>\n"));
  const full = render([...history, { role: "assistant", ...TWO_CALLS }], false);
  const generated = full.slice(prompt.length, -"<|im_end|>\n".length);
  assert.is(
    generated,
    "Two lookups.\n</think>Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n" +
      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n" +
      "<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>\n",
  );
  assert.is(family.formatCompletion(TWO_CALLS, ctx.kwargs), generated);
  const { malformedToolCalls, ...message } = family.parseCompletion(generated + "<|im_end|>", {
    tools,
    kwargs: ctx.kwargs,
    newId: counter(),
  });
  assert.equal(message, {
    content: "Let me check.\n",
    reasoning_content: "Two lookups.\n",
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris","days":2}' } },
      { id: "call_2", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome"}' } },
    ],
  });
  assert.is(malformedToolCalls, 0);
  assert.is(render([...history, { role: "assistant", ...message }], false), full);
  // A plain answer round-trips too; thinking off, the prompt closed the block.
  const plain = family.parseCompletion("\nIt is sunny.\n</think>Sunny.", { kwargs: ctx.kwargs });
  assert.equal(plain, { content: "Sunny.", reasoning_content: "It is sunny.\n", malformedToolCalls: 0 });
  assert.is(
    render([...history, { role: "assistant", ...plain }], false),
    prompt + "It is sunny.\n</think>Sunny.<|im_end|>\n",
  );
  const off = { ...ctx.kwargs, enable_thinking: false };
  assert.ok(render(history, true, off).endsWith("<|im_start|>assistant\n<think></think>"));
  assert.equal(family.parseCompletion("Sunny.<|im_end|>", { kwargs: off }), {
    content: "Sunny.",
    malformedToolCalls: 0,
  });
  assert.is(family.formatCompletion({ content: "Sunny." }, off), "Sunny.");
});

test("parser: a call ends unclosed reasoning; a length cut is all reasoning; a malformed block counts", () => {
  const parse = (text: string) => family.parseCompletion(text, { tools, kwargs: ctx.kwargs, newId: counter() });
  const direct = parse(
    "Need it.\n<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n",
  );
  assert.equal([direct.reasoning_content, direct.content], ["Need it.\n", ""]);
  assert.is(direct.tool_calls![0]!.function.arguments, '{"days":3}');
  assert.equal(parse("Still going"), { content: "", reasoning_content: "Still going", malformedToolCalls: 0 });
  const bad = parse("r\n</think><tool_call>\n<function=>\n</function>\n</tool_call>\n");
  assert.equal([bad.content, bad.malformedToolCalls], ["<tool_call>\n<function=>\n</function>\n</tool_call>", 1]);
});

test("drift classes: assistant text (after `assistant\\n`) is soft; system and user text are hard", () => {
  const messages: ChatMessage[] = [...history, { role: "assistant", content: "Sunny.", reasoning_content: "r\n" }];
  const ids = (m: ChatMessage[]) => folder.encode(render(m, false));
  const expected = ids(messages);
  const types = (m: ChatMessage[]) => compareTrajectories(folder, family, expected, ids(m)).map((x) => x.type);
  assert.equal(types(messages), []);
  assert.equal(types([...history, { role: "assistant", content: "Sunny!", reasoning_content: "r\n" }]), [
    "assistant_text",
  ]);
  assert.equal(types([{ role: "system", content: "Other." }, ...messages.slice(1)]), ["non_assistant_text"]);
  assert.equal(types([history[0]!, { role: "user", content: "Other?" }, messages[2]!]), ["non_assistant_text"]);
});

test("TITO loop: tool run, user append, system append; prompts extend and equal a fresh render", () => {
  const t = new Trajectory("nemotron3");
  const newId = counter();
  const first = playTurn(ctx, t, history, TWO_CALLS, "<|im_end|>", tools, newId);
  const [c1, c2] = first.message.tool_calls as Array<{ id: string }>;
  const r2: ChatMessage[] = [
    ...history,
    first.message,
    { role: "tool", tool_call_id: c1!.id, content: "sunny" },
    { role: "tool", tool_call_id: c2!.id, content: "rain" },
  ];
  const second = playTurn(
    ctx,
    t,
    r2,
    { content: "Sunny, rain.", reasoning_content: "Sum up.\n" },
    "<|im_end|>",
    tools,
    newId,
  );
  const r3: ChatMessage[] = [
    ...r2,
    second.message,
    { role: "system", content: "Be brief." },
    { role: "user", content: "Oslo in 3 days?" },
  ];
  const third = playTurn(
    ctx,
    t,
    r3,
    { content: "", reasoning_content: "Call.\n", tool_calls: [call("Oslo", 3)] },
    "<|im_end|>",
    tools,
    newId,
  );
  for (const [played, request] of [
    [first, history],
    [second, r2],
    [third, r3],
  ] as const)
    assert.equal(played.promptIds, folder.encode(render(request, true)));
  assert.equal(driftTypes(ctx, t), []);
  // A turn with no reasoning: the model writes `<think>\n</think>`, the template `<think></think>`: soft drift only.
  const r4: ChatMessage[] = [
    ...r3,
    third.message,
    { role: "tool", tool_call_id: (third.message.tool_calls as Array<{ id: string }>)[0]!.id, content: "snow" },
  ];
  playTurn(ctx, t, r4, { content: "Snow." }, "<|im_end|>", tools, newId);
  assert.equal(driftTypes(ctx, t), ["assistant_text"]);
});

test.run();
