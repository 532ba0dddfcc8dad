// The minimax_m25 / minimax_m27 families on a synthetic MiniMax folder: settings and
// boundary (docs/models.md), the fixed template's layout, identity, dropped mid-session
// system messages and pinned clear_thinking, the minimax-append-think / minimax-m2 parser
// against the template, and a TITO loop whose prompts equal a fresh render every turn.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { AppendRoleError, TemplateRenderError } from "../../../sessions/errors.ts";
import { selectFamily } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { templateJson } from "../../../sessions/families/tool-args.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { minimaxFolder } from "./glm-minimax-folders.ts";
import { counter, playTurn } from "./tito-loop.ts";
import { call } from "./family-fixtures.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.minimax;

const folder = minimaxFolder("MiniMax-M2.5");
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const render = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs = ctx.kwargs, withTools = tools) =>
  renderOrThrow(ctx.renderer, messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools: withTools });

test("settings the table does not hold: the two templates differ only in the identity sentence", () => {
  const m27 = selectFamily(folder, "minimax_m27");
  const identity = (f: typeof family) =>
    promptContext(folder, f).renderer.render([{ role: "user", content: "hi" }], { addGenerationPrompt: false });
  assert.match(identity(family), "Your name is MiniMax-M2.5 and is built by MiniMax.");
  assert.match(identity(m27), "Your name is MiniMax-M2.7 and is built by MiniMax.");
  assert.is(identity(family).replace("M2.5", "M2.7"), identity(m27), "the templates differ only there");
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

test.run();
