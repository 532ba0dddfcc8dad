import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../sessions/chat-template.ts";
import { AppendRoleError, RollbackError, TokenizationError } from "../../sessions/errors.ts";
import { planPrompt, promptContext, type PromptContext } from "../../sessions/prompt-builder.ts";
import { selectFamily } from "../../sessions/families/index.ts";
import { Trajectory } from "../../sessions/trajectory.ts";
import { renderChat } from "../../sessions/chat-template.ts";
import { qwen3, WEATHER_TOOL } from "./fixtures.ts";

const folder = qwen3();
const family = selectFamily(folder);
const IM_END = folder.tokenId("<|im_end|>")!;
const NL = folder.encode("\n")[0]!;
const ctx = (roles = ["tool"]): PromptContext => promptContext(folder, family, {}, roles);
const tools = [WEATHER_TOOL];

const callMsg = (id: string, city: string): ChatMessage => ({
  role: "assistant",
  content: "",
  tool_calls: [{ id, type: "function", function: { name: "get_weather", arguments: JSON.stringify({ city }) } }],
});
const callText = (city: string) =>
  `<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}"}}\n</tool_call>`;

/** Plays one turn the way the engine would: completion = tokens of the reply text + <|im_end|>. */
function play(t: Trajectory, c: PromptContext, request: ChatMessage[], reply: ChatMessage, replyText: string) {
  const plan = planPrompt(c, t, request, tools);
  if (plan.rollbackToTurns !== undefined) t.rollbackTo(plan.rollbackToTurns);
  const completionIds = [...folder.encode(replyText), IM_END];
  t.commit({ promptIds: plan.promptIds, completionIds, messages: [...request, reply], tools }, family.maxTrimTokens);
  return plan;
}

const m0: ChatMessage[] = [
  { role: "system", content: "You check the weather." },
  { role: "user", content: "Weather in Paris, then Rome?" },
];

test("qwen3 is detected and inserts the newline after <|im_end|> only", () => {
  assert.is(family.name, "qwen3");
  assert.is(family.maxTrimTokens, 0, "the fix inserts a token, it never trims one");
  assert.equal(family.boundaryIds([1, 2, IM_END]), [NL]);
  assert.equal(family.boundaryIds([1, 2, 3]), []);
  assert.equal(family.boundaryIds([]), []);
  const plain = selectFamily(folder, "default");
  assert.is(plain.maxTrimTokens, 0);
  assert.equal(plain.boundaryIds([IM_END]), []);
});

test("first turn renders the whole conversation with the generation prompt", () => {
  const plan = planPrompt(ctx(), new Trajectory("a"), m0, tools);
  assert.equal(Array.from(plan.promptIds), folder.encode(renderChat(folder, m0, { tools, addGenerationPrompt: true })));
  assert.is(plan.rollbackToTurns, undefined);
});

test("a tool loop: each prompt extends the accumulated ids + newline and equals the canonical render", () => {
  const t = new Trajectory("b");
  play(t, ctx(), m0, callMsg("c1", "Paris"), callText("Paris"));
  const before = [...t.currentIds];
  assert.is(before[before.length - 1], IM_END);
  const r2 = [...m0, callMsg("c1", "Paris"), { role: "tool", tool_call_id: "c1", content: "sunny" }];
  const plan = planPrompt(ctx(), t, r2, tools);
  assert.equal(Array.from(plan.promptIds).slice(0, before.length), before, "nothing generated is re-tokenized");
  assert.is(plan.promptIds[before.length], NL, "the template's newline after <|im_end|> is put back");
  // The model generated exactly what the template renders here, so TITO and a full render agree.
  assert.equal(Array.from(plan.promptIds), folder.encode(renderChat(folder, r2, { tools, addGenerationPrompt: true })));
});

test("a run of tool messages is one segment", () => {
  const t = new Trajectory("c");
  const two: ChatMessage = {
    role: "assistant",
    content: "",
    tool_calls: [
      { id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } },
      { id: "c2", type: "function", function: { name: "get_weather", arguments: '{"city": "Rome"}' } },
    ],
  };
  play(t, ctx(), m0, two, `${callText("Paris")}\n${callText("Rome")}`);
  const r2 = [
    ...m0,
    two,
    { role: "tool", tool_call_id: "c1", content: "sunny" },
    { role: "tool", tool_call_id: "c2", content: "rain" },
  ];
  const plan = planPrompt(ctx(), t, r2, tools);
  assert.equal(Array.from(plan.promptIds), folder.encode(renderChat(folder, r2, { tools, addGenerationPrompt: true })));
  const text = folder.decode(Array.from(plan.promptIds).slice(t.currentIds.length));
  assert.is(text.split("<|im_start|>user").length - 1, 1, "both responses share one user block: " + text);
});

test("an appended user message is refused when only tool may be appended, naming index and roles", () => {
  const t = new Trajectory("d");
  play(t, ctx(), m0, { role: "assistant", content: "Sunny." }, "Sunny.");
  const r2 = [...m0, { role: "assistant", content: "Sunny." }, { role: "user", content: "And Rome?" }];
  try {
    planPrompt(ctx(), t, r2, tools);
    assert.unreachable("must refuse");
  } catch (err) {
    assert.instance(err, AppendRoleError);
    assert.is((err as AppendRoleError).status, 400);
    assert.match((err as Error).message, "index 3");
    assert.match((err as Error).message, "'user'");
    assert.match((err as Error).message, "['tool']");
  }
  const plan = planPrompt(ctx(["tool", "user"]), t, r2, tools);
  assert.equal(Array.from(plan.promptIds), folder.encode(renderChat(folder, r2, { tools, addGenerationPrompt: true })));
});

test("one-step rollback is accepted, two-step refused", () => {
  const t = new Trajectory("e");
  const r1 = m0;
  play(t, ctx(), r1, callMsg("c1", "Paris"), callText("Paris"));
  const afterTurn1 = [...t.currentIds];
  const r2 = [...r1, callMsg("c1", "Paris"), { role: "tool", tool_call_id: "c1", content: "sunny" }];
  play(t, ctx(), r2, callMsg("c2", "Rome"), callText("Rome"));
  const r3 = [...r2, callMsg("c2", "Rome"), { role: "tool", tool_call_id: "c2", content: "rain" }];
  play(t, ctx(), r3, { role: "assistant", content: "Done." }, "Done.");
  assert.is(t.assistantCount, 3);

  // Retry turn 3 with a different tool result: discards one turn (turn 3).
  const retry = [...r2, callMsg("c2", "Rome"), { role: "tool", tool_call_id: "c2", content: "snow" }];
  const plan = planPrompt(ctx(), t, retry, tools);
  assert.is(plan.rollbackToTurns, 2);
  // Diverging inside turn 2's appended messages would discard turns 2 and 3.
  const tooFar = [...r1, callMsg("c1", "Paris"), { role: "tool", tool_call_id: "c1", content: "cloudy" }];
  assert.throws(
    () => planPrompt(ctx(), t, tooFar, tools),
    (e: unknown) => e instanceof RollbackError && /rollback failed: .*2 assistant turns/.test((e as Error).message),
  );
  // Diverging before any assistant turn would discard all three turns.
  assert.throws(
    () => planPrompt(ctx(), t, [{ role: "user", content: "other" }], tools),
    (e: unknown) =>
      e instanceof RollbackError &&
      (e as RollbackError).status === 400 &&
      /at message index 0, which would discard 3 assistant turns/.test((e as Error).message),
  );

  t.rollbackTo(plan.rollbackToTurns!);
  assert.is(t.assistantCount, 2);
  assert.is(t.messages.length, r2.length + 1);
  assert.equal(Array.from(plan.promptIds).slice(0, t.currentIds.length), [...t.currentIds]);
  assert.ok(afterTurn1.every((id, i) => t.currentIds[i] === id));
});

test("a request that only drops the last turn's reply rolls back and regenerates", () => {
  const t = new Trajectory("f");
  play(t, ctx(), m0, callMsg("c1", "Paris"), callText("Paris"));
  const r2 = [...m0, callMsg("c1", "Paris"), { role: "tool", tool_call_id: "c1", content: "sunny" }];
  play(t, ctx(), r2, { role: "assistant", content: "Sunny." }, "Sunny.");
  const plan = planPrompt(ctx(), t, r2, tools);
  assert.is(plan.rollbackToTurns, 1);
});

test("a retried first turn rolls back to the empty session and renders as a first turn", () => {
  const t = new Trajectory("h");
  play(t, ctx(), m0, callMsg("c1", "Paris"), callText("Paris"));
  // The client never saw turn 1's reply and sends the same first request again.
  const again = planPrompt(ctx(), t, m0, tools);
  assert.is(again.rollbackToTurns, 0);
  assert.equal(
    Array.from(again.promptIds),
    folder.encode(renderChat(folder, m0, { tools, addGenerationPrompt: true })),
  );
  // A different first request (an edited user message) is the same one-turn rollback.
  const edited = [m0[0]!, { role: "user", content: "Weather in Oslo?" }];
  const plan = planPrompt(ctx(), t, edited, tools);
  assert.is(plan.rollbackToTurns, 0);
  assert.equal(
    Array.from(plan.promptIds),
    folder.encode(renderChat(folder, edited, { tools, addGenerationPrompt: true })),
  );
  t.rollbackTo(0);
  assert.is(t.assistantCount, 0);
  assert.equal(t.messages, []);
  play(t, ctx(), edited, callMsg("c9", "Oslo"), callText("Oslo"));
  assert.is(t.assistantCount, 1, "the retried first turn commits on the emptied session");

  // With two turns committed, going back before the first would discard both: refused.
  const r2 = [...edited, callMsg("c9", "Oslo"), { role: "tool", tool_call_id: "c9", content: "cold" }];
  play(t, ctx(), r2, { role: "assistant", content: "Cold." }, "Cold.");
  assert.throws(
    () => planPrompt(ctx(), t, m0, tools),
    (e: unknown) => e instanceof RollbackError && /would discard 2 assistant turns/.test((e as Error).message),
  );
});

test("commit refuses a trajectory that does not extend the previous checkpoint (500)", () => {
  const t = new Trajectory("g");
  t.commit({ promptIds: [1, 2, 3], completionIds: [4, IM_END], messages: [] }, 1);
  // The last token may be trimmed (maxTrimTokens = 1) ...
  t.commit({ promptIds: [1, 2, 3, 4, 9], completionIds: [5], messages: [] }, 1);
  assert.is(t.assistantCount, 2);
  // ... but not an earlier one.
  assert.throws(
    () => t.commit({ promptIds: [1, 2, 7, 4, 9, 5], completionIds: [6], messages: [] }, 1),
    (e: unknown) =>
      e instanceof TokenizationError && (e as TokenizationError).status === 500 && /token 2/.test((e as Error).message),
  );
  assert.throws(
    () => t.commit({ promptIds: [1, 2, 3, 4, 9, 8], completionIds: [], messages: [] }, 0),
    (e: unknown) => e instanceof TokenizationError,
  );
  assert.is(t.assistantCount, 2, "a refused commit leaves the state unchanged");
});

test("under a matcher the request's rewritten copies match; the plan keeps the stored messages", () => {
  const t = new Trajectory("matcher");
  const stored = { ...callMsg("c1", "Paris"), reasoning_content: "Paris first." };
  play(t, ctx(), m0, stored, callText("Paris"));
  const rewritten = { ...callMsg("toolu_1", "Paris"), content: null };
  const request = [...m0, rewritten, { role: "tool", tool_call_id: "toolu_1", content: "sunny" }];
  const strict = planPrompt(ctx(), t, request, tools);
  assert.is(strict.rollbackToTurns, 0, "strict: the turn diverges, and is generated again");
  const plan = planPrompt({ ...ctx(), matcher: "role-content" }, t, request, tools);
  assert.is(plan.rollbackToTurns, undefined);
  assert.ok(plan.adopted);
  assert.is(plan.messages[2], t.messages[2], "the stored assistant message, reasoning and id kept");
  assert.equal(plan.messages[3], { role: "tool", tool_call_id: "c1", content: "sunny" });
  assert.equal(Array.from(plan.promptIds).slice(0, t.currentIds.length), [...t.currentIds]);
});

test.run();
