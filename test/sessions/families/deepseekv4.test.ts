// The deepseekv4 family: detection (synthetic folder and the remapped V3 BPE with model_type
// deepseek_v4), constants, the encoder's folding/sorting/transition rules and kwargs
// (docs/models.md; the cases of upstream test_deepseek_v4.py), and TITO loops rendered as a diff of the
// real history (tool results fold into the user block that follows them).
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { AppendRoleError } from "../../../sessions/errors.ts";
import { REASONING_EFFORT_MAX, encodeDeepseekV4 } from "../../../sessions/families/deepseekv4-encoder.ts";
import { detectFamily, selectFamily } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, type PromptContext } from "../../../sessions/prompt-builder.ts";
import type { TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { deepseekFolder, syntheticDeepseekFolder } from "../../helpers/deepseek-folder.ts";
import { WEATHER_TOOL } from "../fixtures.ts";
import { DEEPSEEK } from "./family-fixtures.ts";

const { call, twoCalls, m0 } = DEEPSEEK;

const PIN = { drop_thinking: false };
const tools = [WEATHER_TOOL];
const render = (messages: ChatMessage[], gen: boolean, kwargs: Record<string, unknown> = PIN, t: unknown = tools) =>
  encodeDeepseekV4(messages, { tools: t as unknown[], addGenerationPrompt: gen, kwargs });

const tool = (id: string, content: string): ChatMessage => ({ role: "tool", tool_call_id: id, content });

test("detection on synthetic folders by model_type (the V4 constants are in the table)", () => {
  assert.is(detectFamily(syntheticDeepseekFolder("deepseek_v4")), "deepseekv4");
  assert.is(detectFamily(syntheticDeepseekFolder("deepseek_v32")), "deepseekv32");
  assert.is(detectFamily(syntheticDeepseekFolder("deepseek_v3")), "default");
});

test("tool results fold into one user block, sorted by call order, joined with a following user text", () => {
  const text = render(
    [...m0, twoCalls, tool("c2", "rain"), tool("c1", "sunny"), { role: "user", content: "thanks" }],
    true,
  );
  assert.ok(
    text.endsWith(
      "<｜end▁of▁sentence｜><｜User｜><tool_result>sunny</tool_result>\n\n<tool_result>rain</tool_result>\n\nthanks<｜Assistant｜><think>",
    ),
    text,
  );
  assert.ok(
    text.includes(
      '<｜Assistant｜><think>two cities</think>Checking both.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n',
    ),
  );
  // A user block opens the assistant's turn only before an assistant or at the end.
  const two = render([m0[0]!, { role: "user", content: "a" }, { role: "user", content: "b" }], true, PIN, []);
  assert.is(two, "<｜begin▁of▁sentence｜>You check the weather.<｜User｜>a\n\nb<｜Assistant｜><think>");
});

test("tools: a section in the first system message or a new one; [] is none; bare function dicts rejected", () => {
  const text = render(m0, true);
  assert.ok(text.startsWith("<｜begin▁of▁sentence｜>You check the weather.\n\n## Tools\n\nYou have access"));
  assert.ok(text.includes('### Available Tool Schemas\n\n{"name": "get_weather", "description": "Weather in a city"'));
  assert.ok(text.includes("invoke tool calls.\n<｜User｜>Paris and Rome?"));
  assert.ok(render([m0[1]!], true).startsWith("<｜begin▁of▁sentence｜>\n\n## Tools\n"));
  assert.is(render(m0, true, PIN, []), render(m0, true, PIN, null));
  assert.throws(() => render(m0, true, PIN, [WEATHER_TOOL.function]), /tools\[0\]/);
});

test("reasoning_effort: None is omitted, max prefixes a paragraph in thinking mode, high is a no-op, others throw", () => {
  const plain = render(m0, true);
  assert.is(render(m0, true, { ...PIN, reasoning_effort: null }), plain);
  assert.is(render(m0, true, { ...PIN, reasoning_effort: "high" }), plain);
  assert.is(
    render(m0, true, { ...PIN, reasoning_effort: "max" }),
    "<｜begin▁of▁sentence｜>" + REASONING_EFFORT_MAX + plain.slice(21),
  );
  assert.is(
    render(m0, true, { ...PIN, reasoning_effort: "max", thinking: false }),
    render(m0, true, { ...PIN, thinking: false }),
  );
  assert.throws(() => render(m0, true, { ...PIN, reasoning_effort: "low" }), /reasoning_effort/);
  assert.throws(() => render(m0, true, { ...PIN, effort: "max" }), /effort/, "unknown kwargs are rejected");
});

test("add_generation_prompt=false strips <｜Assistant｜><think> after a user, tool or tool+user tail only", () => {
  for (const tail of [
    [],
    [twoCalls, tool("c1", "s"), tool("c2", "r")],
    [twoCalls, tool("c1", "s"), { role: "user", content: "u" }],
  ]) {
    const messages = [...m0, ...tail];
    assert.is(render(messages, true), render(messages, false) + "<｜Assistant｜><think>");
    assert.is(
      render(messages, true, { thinking: false }),
      render(messages, false, { thinking: false }) + "<｜Assistant｜></think>",
    );
  }
  const assistant = [...m0, { role: "assistant", content: "Sunny.", reasoning_content: "r" }];
  assert.is(render(assistant, false), render(assistant, true));
  const woEos = [...m0, { role: "assistant", content: "Sun", reasoning_content: "r", wo_eos: true }];
  assert.ok(render(woEos, false).endsWith("<think>r</think>Sun"));
  assert.is(render(woEos, false), render(woEos, true));
});

test("thinking kwargs, a mid-conversation system as bare text, inputs not mutated, string ≡ object args", () => {
  assert.ok(render(m0, true, { thinking_mode: "chat" }).endsWith("<｜Assistant｜></think>"));
  assert.ok(render(m0, true, { enable_thinking: false, thinking: true }).endsWith("</think>"));
  assert.ok(render(m0, true, {}).endsWith("<think>"));
  const midSystem = render(
    [...m0, { role: "assistant", content: "x", reasoning_content: "" }, { role: "system", content: "Be brief." }],
    false,
  );
  assert.ok(midSystem.endsWith("</think>x<｜end▁of▁sentence｜>Be brief."), midSystem);
  const messages = [
    ...m0,
    { ...twoCalls, tool_calls: [{ id: "c1", function: { name: "get_weather", arguments: { city: "Paris" } } }] },
  ];
  const before = JSON.stringify(messages);
  const asString = [...m0, { ...twoCalls, tool_calls: [call("c1", "Paris")] }];
  assert.is(render(messages, true), render(asString, true));
  render([...messages, tool("c1", "x"), { role: "user", content: "y" }], true);
  assert.is(JSON.stringify(messages), before);
  // V4 wraps arguments that are not JSON instead of failing.
  const bad = render(
    [...m0, { role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: "oops" } }] }],
    false,
  );
  assert.ok(bad.includes('<｜DSML｜parameter name="arguments" string="true">oops</｜DSML｜parameter>'));
});

test("drop_thinking: false keeps history and is append-only; true drops it unless tools are present", () => {
  const turn1 = [...m0, { role: "assistant", content: "Sunny.", reasoning_content: "easy" }];
  const turn2 = [...turn1, { role: "user", content: "thanks" }];
  assert.ok(render(turn2, true, PIN, []).startsWith(render(turn1, false, PIN, [])));
  const drop = { drop_thinking: true };
  assert.ok(
    render(turn2, true, drop, []).includes("Rome?<｜Assistant｜></think>Sunny.<｜end▁of▁sentence｜>"),
    "reasoning dropped",
  );
  assert.not.ok(render(turn2, true, drop, []).startsWith(render(turn1, false, drop, [])));
  assert.is(render(turn2, true, drop), render(turn2, true), "tools force drop_thinking off");
});

/** A TITO loop on `folder`: tool loop with results out of call order, tool+user, user; then a refused system. */
function loop(folder: TokenizerFolder, kwargs: Record<string, unknown>) {
  const family = selectFamily(folder);
  const ctx: PromptContext = promptContext(folder, family, kwargs);
  const eos = folder.tokenId("<｜end▁of▁sentence｜>")!;
  const t = new Trajectory("v4");
  const replies: ChatMessage[] = [
    twoCalls,
    { role: "assistant", content: "", reasoning_content: "one more", tool_calls: [call("c3", "Oslo")] },
    { role: "assistant", content: "Rain tomorrow.", reasoning_content: "look" },
    { role: "assistant", content: "Bye.", reasoning_content: "" },
  ];
  const steps: ChatMessage[][] = [
    m0,
    [tool("c2", "rain"), tool("c1", "sunny")],
    [tool("c3", "cloudy"), { role: "user", content: "And tomorrow?" }],
    [{ role: "user", content: "Thanks." }],
  ];
  steps.forEach((appended, i) => {
    const request = i === 0 ? appended : [...t.messages, ...appended];
    const before = [...t.currentIds];
    const plan = planPrompt(ctx, t, request, tools);
    assert.equal(Array.from(plan.promptIds).slice(0, before.length), before, `turn ${i + 1} extends the checkpoint`);
    assert.equal(
      Array.from(plan.promptIds),
      folder.encode(render(request, true, kwargs)),
      `turn ${i + 1} is the canonical prompt`,
    );
    const completion = [...folder.encode(family.formatCompletion(replies[i] as never, kwargs)), eos];
    t.commit({ promptIds: plan.promptIds, completionIds: completion, messages: [...request, replies[i]!], tools }, 0);
    const canonical = folder.encode(render([...t.messages], false, kwargs));
    assert.equal(compareTrajectories(folder, family, canonical, t.currentIds), [], `turn ${i + 1} has no drift`);
  });
  assert.throws(
    () => planPrompt(ctx, t, [...t.messages, { role: "system", content: "new rules" }], tools),
    (e: unknown) => e instanceof AppendRoleError,
  );
  return t;
}

test("TITO loop on the synthetic V4 folder, thinking and chat", () => {
  loop(syntheticDeepseekFolder(), PIN);
  loop(syntheticDeepseekFolder(), { ...PIN, thinking: false });
});

test("TITO loop on the V3 BPE with model_type deepseek_v4; the tool+user increment is one user block", () => {
  const folder = deepseekFolder("deepseek_v4");
  const t = loop(folder, PIN);
  const text = folder.decode(t.currentIds);
  assert.ok(
    text.includes(
      "<｜User｜><tool_result>sunny</tool_result>\n\n<tool_result>rain</tool_result><｜Assistant｜><think>",
    ),
  );
  assert.ok(text.includes("<｜User｜><tool_result>cloudy</tool_result>\n\nAnd tomorrow?<｜Assistant｜><think>"));
});

test("drift: trailing <｜Assistant｜><think> is ignored; changed user text is hard, assistant text soft", () => {
  const folder = syntheticDeepseekFolder();
  const family = selectFamily(folder);
  const turn = [...m0, { role: "assistant", content: "Sunny.", reasoning_content: "r" }];
  const expected = folder.encode(render(turn, false));
  const withPrompt = folder.encode(render([...turn, { role: "user", content: "x" }], true));
  const cut = folder.encode(render([...turn, { role: "user", content: "x" }], false));
  assert.equal(compareTrajectories(folder, family, cut, withPrompt), [], "the opener's ids are trailing ids");
  const types = (m: ChatMessage[]) =>
    compareTrajectories(folder, family, expected, folder.encode(render(m, false))).map((x) => x.type);
  assert.equal(types([...m0, { role: "assistant", content: "Rain.", reasoning_content: "r" }]), ["assistant_text"]);
  assert.equal(types([m0[0]!, { role: "user", content: "Oslo?" }, turn[2]!]), ["non_assistant_text"]);
});

test.run();
