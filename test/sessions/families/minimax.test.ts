// The minimax_m25 / minimax_m27 families on a synthetic MiniMax folder: settings and
// boundary (docs/models.md), the fixed template's layout, identity, dropped mid-session
// system messages and pinned clear_thinking, the minimax-append-think / minimax-m2 parser
// against the template, and a TITO loop whose prompts equal a fresh render every turn.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { AppendRoleError, SessionConfigError, TemplateRenderError } from "../../../sessions/errors.ts";
import { detectFamily, selectFamily, type AssistantTurn } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { templateJson } from "../../../sessions/families/tool-args.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { minimaxFolder } from "./glm-minimax-folders.ts";
import { counter, driftTypes, playTurn } from "./glm-minimax-loop.ts";

const folder = minimaxFolder("MiniMax-M2.5");
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const END = folder.tokenId("[e~[")!;
const HEADER = folder.tokenId("]~b]")!;
const NL = folder.encode("\n")[0]!;
const render = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs = ctx.kwargs, withTools = tools) =>
  renderOrThrow(ctx.renderer, messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools: withTools });

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string" },
          days: { type: "integer" },
          hours: { anyOf: [{ type: "number" }, { type: "null" }] },
          unit: { enum: ["c", "f"] },
        },
      },
    },
  },
  {
    type: "function",
    function: {
      name: "search",
      parameters: {
        type: "object",
        properties: { query: { type: "string" }, filters: { type: "object" }, exact: { type: "boolean" } },
      },
    },
  },
];
const call = (name: string, args: Record<string, unknown>) => ({
  type: "function" as const,
  function: { name, arguments: args },
});
const TWO_CALLS: AssistantTurn = {
  content: "Let me check both.",
  reasoning_content: "Two lookups needed.",
  tool_calls: [
    call("get_weather", { city: "Paris", days: 2 }),
    call("search", { query: "Rome 42", filters: { lang: "it", n: 3 }, exact: true }),
  ],
};
const history: ChatMessage[] = [
  { role: "system", content: "You are a weather bot." },
  { role: "user", content: "Weather in Paris, and search Rome?" },
];

test("settings: detected by identity, no trim, newline trailing, no system appends, pinned clear_thinking, parsers", () => {
  assert.is(detectFamily(folder), "minimax_m25");
  assert.is(detectFamily(minimaxFolder("MiniMax-M2.7")), "minimax_m27");
  for (const name of ["minimax_m25", "minimax_m27"]) {
    const f = selectFamily(folder, name);
    assert.is(f.name, name);
    assert.is(f.maxTrimTokens, 0);
    assert.equal([...f.trailingTokenIds], [NL]);
    assert.equal(f.appendRoles, ["tool", "user", "assistant"]);
    assert.equal(f.pinnedKwargs, { clear_thinking: false });
    assert.equal(f.sglangParsers, { reasoning: "minimax-append-think", toolCall: "minimax-m2" });
    assert.equal(f.stopTokens, ["[e~["]);
    assert.ok(f.isAssistantSegment(HEADER, "ai\n<think>\nr"));
    assert.not.ok(f.isAssistantSegment(HEADER, "user\nhi"));
    assert.not.ok(f.isAssistantSegment(END, "\n"));
  }
  const m27 = selectFamily(folder, "minimax_m27");
  const identity = (f: typeof family) =>
    promptContext(folder, f).renderer.render([{ role: "user", content: "hi" }], { addGenerationPrompt: false });
  assert.match(identity(family), "Your name is MiniMax-M2.5 and is built by MiniMax.");
  assert.match(identity(m27), "Your name is MiniMax-M2.7 and is built by MiniMax.");
  assert.is(identity(family).replace("M2.5", "M2.7"), identity(m27), "the templates differ only there");
});

test("boundary: the newline after a trailing [e~[ is put back, nothing else", () => {
  assert.equal(family.boundaryIds([1, 2, END]), [NL]);
  assert.equal(family.boundaryIds([1, END, 2]), []);
  assert.equal(family.boundaryIds([]), []);
  assert.is(family.boundaryDrop, undefined);
  assert.throws(
    () => selectFamily(minimaxFolder("MiniMax-M2.5", "[e~["), "minimax_m25"),
    (e: unknown) => e instanceof SessionConfigError && /\[e~\[/.test((e as Error).message),
  );
});

test("template layout: system and tools, user, assistant with think block and calls, one header per tool run", () => {
  const messages: ChatMessage[] = [
    ...history,
    {
      role: "assistant",
      content: "Checking.",
      reasoning_content: "r",
      tool_calls: [call("get_weather", { city: "Oslo", days: 1 })],
    },
    { role: "tool", tool_call_id: "a", content: "sunny" },
    { role: "tool", tool_call_id: "b", content: "warm" },
  ];
  const text = render(messages, true, ctx.kwargs, [tools[0]]);
  const toolJson = templateJson(tools[0]!.function);
  assert.is(
    text,
    "]~!b[]~b]system\nYou are a weather bot.\n\n# Tools\nYou may call one or more tools to assist with the user query.\n" +
      "Here are the tools available in JSONSchema format:\n\n<tools>\n" +
      `<tool>${toolJson}</tool>\n</tools>\n\n` +
      "When making tool calls, use XML format to invoke tools and pass parameters:\n\n<minimax:tool_call>\n" +
      '<invoke name="tool-name-1">\n<parameter name="param-key-1">param-value-1</parameter>\n' +
      '<parameter name="param-key-2">param-value-2</parameter>\n...\n</invoke>\n</minimax:tool_call>[e~[\n' +
      "]~b]user\nWeather in Paris, and search Rome?[e~[\n" +
      "]~b]ai\n<think>\nr\n</think>\n\nChecking.\n<minimax:tool_call>\n" +
      '<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n<parameter name="days">1</parameter>\n</invoke>\n' +
      "</minimax:tool_call>[e~[\n" +
      "]~b]tool\n<response>sunny</response>\n<response>warm</response>[e~[\n" +
      "]~b]ai\n<think>\n",
  );
  assert.is(
    render([{ role: "user", content: "hi" }], false, ctx.kwargs, []),
    "]~!b[]~b]system\nYou are a helpful assistant. Your name is MiniMax-M2.5 and is built by MiniMax.[e~[\n]~b]user\nhi[e~[\n",
  );
});

test("a system message after the first is dropped, so a system append is refused", () => {
  const withSystem: ChatMessage[] = [...history, { role: "system", content: "late" }, { role: "user", content: "x" }];
  assert.is(render(withSystem, true), render([...history, { role: "user", content: "x" }], true));
  const t = new Trajectory("sys");
  playTurn(ctx, t, history, { content: "Hi.", reasoning_content: "r" }, "[e~[", tools, counter());
  const request = [...t.messages, { role: "system", content: "late" }];
  assert.throws(
    () => planPrompt(ctx, t, request, tools),
    (e: unknown) => e instanceof AppendRoleError,
  );
});

test("clear_thinking must be pinned false; a tool message with no call before it is a render error", () => {
  const before: ChatMessage[] = [...history, { role: "assistant", content: "Sunny.", reasoning_content: "easy" }];
  const after: ChatMessage[] = [...before, { role: "user", content: "Thanks." }];
  assert.not.ok(render(after, false, {}).startsWith(render(before, false, {})), "default: not append-only");
  assert.ok(render(after, false).startsWith(render(before, false)), "pinned: append-only");
  assert.throws(
    () => render([...before, { role: "tool", tool_call_id: "x", content: "?" }], false),
    (e: unknown) =>
      e instanceof TemplateRenderError && /no previous assistant message with a tool call/.test(String(e)),
  );
});

test("round trip: the parsed message (think block in its content) renders as the model wrote it", () => {
  const prompt = render(history, true);
  const full = render([...history, { role: "assistant", ...TWO_CALLS }], false);
  assert.ok(full.startsWith(prompt) && prompt.endsWith("]~b]ai\n<think>\n"));
  const generated = full.slice(prompt.length).replace(/\[e~\[\n$/, "");
  assert.is(family.formatCompletion(TWO_CALLS, ctx.kwargs), generated);
  const parsed = family.parseCompletion(generated + "[e~[", { tools, kwargs: ctx.kwargs, newId: counter() });
  assert.equal(parsed, {
    content: "<think>Two lookups needed.\n</think>\n\nLet me check both.\n",
    tool_calls: TWO_CALLS.tool_calls!.map((c, i) => ({
      id: `call_${i + 1}`,
      type: "function",
      function: { name: c.function.name, arguments: JSON.stringify(c.function.arguments) },
    })),
    malformedToolCalls: 0,
  });
  const { malformedToolCalls, ...message } = parsed;
  void malformedToolCalls;
  assert.is(render([...history, { role: "assistant", ...message }], false), full);
  assert.is(family.formatCompletion(message, ctx.kwargs), generated);
});

test("parser: values typed by the schema, stripped of surrounding newlines", () => {
  const args = (name: string, params: Record<string, string>) => {
    const body = Object.entries(params)
      .map(([k, v]) => `<parameter name="${k}">${v}</parameter>\n`)
      .join("");
    const text = `r\n</think>\n\n<minimax:tool_call>\n<invoke name="${name}">\n${body}</invoke>\n</minimax:tool_call>`;
    return JSON.parse(family.parseCompletion(text, { tools }).tool_calls![0]!.function.arguments);
  };
  assert.equal(args("get_weather", { city: "\n42\n", days: "5", hours: "2.0", unit: "c" }), {
    city: "42",
    days: 5,
    hours: 2,
    unit: "c",
  });
  assert.equal(args("get_weather", { hours: "null", days: "five", other: "7" }), {
    hours: null,
    days: "five",
    other: "7",
  });
  assert.equal(args("search", { filters: '{"a": [1]}', exact: "yes", query: "None" }), {
    filters: { a: [1] },
    exact: true,
    query: null,
  });
});

test("parser: undeclared, malformed, reasoning-only and unclosed blocks stay in the content", () => {
  const parse = (text: string) => family.parseCompletion(text, { tools, newId: counter() });
  const invoke = (name: string) => `<invoke name="${name}">\n<parameter name="city">X</parameter>\n</invoke>\n`;
  const block = (...invokes: string[]) => `\n<minimax:tool_call>\n${invokes.join("")}</minimax:tool_call>`;
  const undeclared = block(invoke("launch"), invoke("get_weather"));
  assert.equal(parse(`r\n</think>\n\nHi.${undeclared}`), {
    content: `<think>r\n</think>\n\nHi.${undeclared}`,
    malformedToolCalls: 1,
  });
  assert.is(
    family.parseCompletion(`r\n</think>\n\n${block(invoke("launch"))}`).tool_calls!.length,
    1,
    "no tools declared",
  );
  const junk = block(`${invoke("get_weather")}stray text`);
  assert.equal(parse(`r\n</think>\n\n${junk}`).malformedToolCalls, 1);
  assert.equal(parse(`r\n</think>\n\n${block()}`).malformedToolCalls, 1, "a block with no invoke");
  const thought = parse(`maybe ${block(invoke("get_weather"))} later\n</think>\n\nNo call.`);
  assert.equal([thought.tool_calls, thought.malformedToolCalls], [undefined, 0]);
  const cut = parse(`r\n</think>\n\n${block(invoke("get_weather"))}\n<minimax:tool_call>\n<invoke name="get`);
  assert.equal([cut.tool_calls!.length, cut.malformedToolCalls], [1, 0]);
  assert.match(cut.content, /<minimax:tool_call>\n<invoke name="get$/);
});

test("TITO loop: tool run, user append, injected assistant; every prompt equals a fresh render, no drift", () => {
  const t = new Trajectory("minimax");
  const newId = counter();
  const r1 = history;
  const first = playTurn(ctx, t, r1, TWO_CALLS, "[e~[", tools, newId);
  const [c1, c2] = first.message.tool_calls as Array<{ id: string }>;
  const r2: ChatMessage[] = [
    ...r1,
    first.message,
    { role: "tool", tool_call_id: c1!.id, content: "sunny" },
    { role: "tool", tool_call_id: c2!.id, content: "3 results" },
  ];
  const second = playTurn(
    ctx,
    t,
    r2,
    { content: "Paris is sunny.", reasoning_content: "Summarize." },
    "[e~[",
    tools,
    newId,
  );
  assert.is(second.promptIds[first.promptIds.length + first.completionIds.length], NL, "the newline put back");
  const r3: ChatMessage[] = [...r2, second.message, { role: "user", content: "And Rome tomorrow?" }];
  const third = playTurn(
    ctx,
    t,
    r3,
    { content: "", reasoning_content: "One call.", tool_calls: [call("get_weather", { city: "Rome", days: 1 })] },
    "[e~[",
    tools,
    newId,
  );
  const r4: ChatMessage[] = [
    ...r3,
    third.message,
    { role: "tool", tool_call_id: (third.message.tool_calls as Array<{ id: string }>)[0]!.id, content: "rain" },
    { role: "assistant", content: "(injected note)" },
    { role: "user", content: "Summary?" },
  ];
  const fourth = playTurn(
    ctx,
    t,
    r4,
    { content: "Rain in Rome.", reasoning_content: "Wrap up." },
    "[e~[",
    tools,
    newId,
  );
  for (const [played, request] of [
    [first, r1],
    [second, r2],
    [third, r3],
    [fourth, r4],
  ] as const)
    assert.equal(played.promptIds, folder.encode(render(request, true)));
  assert.equal(driftTypes(ctx, t), []);
});

test.run();
