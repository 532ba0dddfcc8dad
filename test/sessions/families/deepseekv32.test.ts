// The deepseekv32 family on the real DeepSeek V3 BPE (npm) with V3.2's <think>/</think>
// remap: detection by model_type, the family's constants, the encoder's format facts and
// edge cases (docs/models.md; the cases of upstream test_deepseek_v32.py), drift classes, and multi-turn
// TITO loops whose accumulated ids must equal the canonical render's.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { appendedDeepseekV32, encodeDeepseekV32 } from "../../../sessions/families/deepseekv32-encoder.ts";
import { detectFamily, selectFamily, type TitoFamily } from "../../../sessions/families/index.ts";
import { planPrompt, promptContext, type PromptContext } from "../../../sessions/prompt-builder.ts";
import { loadTokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { serverKwargs, TurnKwargs } from "../../../sessions/template-kwargs.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { deepseekFolder, remappedDeepseekDir } from "../../helpers/deepseek-folder.ts";
import { npmFolder, WEATHER_TOOL } from "../fixtures.ts";
import { DEEPSEEK } from "./family-fixtures.ts";

const { call, twoCalls, m0 } = DEEPSEEK;

const folder = deepseekFolder("deepseek_v32");
const family = selectFamily(folder);
const PIN = { drop_thinking: false };
const tools = [WEATHER_TOOL];
const USER = 128803;
const ASSISTANT = 128804;
const EOS = 1;

const render = (messages: ChatMessage[], gen: boolean, kwargs: Record<string, unknown> = PIN, t: unknown[] = tools) =>
  encodeDeepseekV32(messages, { tools: t, addGenerationPrompt: gen, kwargs });

const DSML_TWO =
  '\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n' +
  '<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Rome</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>';

test("the remapped V3 tokenizer: <think>/</think> at 128798/128799, content tokens, atomic", () => {
  const plain = npmFolder("deepseek_v3");
  assert.is(plain.tokenId("<think>"), undefined, "V3 has no <think>");
  assert.is(plain.tokenId("<｜place▁holder▁no▁798｜>"), 128798);
  assert.ok(plain.specialTokenIds.has(128798), "V3 flags the placeholder special");
  assert.is(folder.tokenId("<think>"), 128798);
  assert.is(folder.tokenId("</think>"), 128799);
  assert.not.ok(folder.specialTokenIds.has(128798), "after the remap <think> is content, like <｜User｜>");
  assert.not.ok(folder.specialTokenIds.has(USER));
  assert.equal(folder.encode("<think>x</think>"), [128798, folder.encode("x")[0], 128799]);
  assert.equal(folder.encode("<｜begin▁of▁sentence｜><｜User｜>"), [0, USER]);
});

test("detection: model_type deepseek_v32 / deepseek_v4 on the remapped folder, default without config.json", () => {
  assert.is(detectFamily(folder), "deepseekv32");
  assert.is(detectFamily(deepseekFolder("deepseek_v4")), "deepseekv4");
  assert.is(detectFamily(npmFolder("deepseek_v3")), "default");
  assert.is(detectFamily(loadTokenizerFolder(remappedDeepseekDir("deepseek_v3"))), "default");
});

test("layout: BOS, raw system + tools section, user/assistant, tool results with no role token", () => {
  const text = render([...m0, twoCalls, { role: "tool", content: "sunny" }, { role: "tool", content: "rain" }], true);
  assert.ok(text.startsWith("<｜begin▁of▁sentence｜>You check the weather.\n\n## Tools\n"));
  assert.ok(text.includes('<functions>\n{"name": "get_weather", "description": "Weather in a city", "parameters": '));
  assert.ok(
    text.endsWith(
      "\n</functions>\n<｜User｜>Paris and Rome?<｜Assistant｜><think>two cities</think>Checking both." +
        DSML_TWO +
        "<｜end▁of▁sentence｜>\n\n<function_results>\n<result>sunny</result>\n<result>rain</result>\n</function_results>\n\n<think>",
    ),
    text,
  );
});

test("tools go into the first system message, or a new empty one; tools=[] is none", () => {
  const noSystem = render([{ role: "user", content: "hi" }], true);
  assert.ok(noSystem.startsWith("<｜begin▁of▁sentence｜>\n\n## Tools\n"));
  assert.is(render(m0, true, PIN, []), render(m0, true, PIN, null as never));
  assert.is(
    render(m0, true, PIN, []),
    "<｜begin▁of▁sentence｜>You check the weather.<｜User｜>Paris and Rome?<｜Assistant｜><think>",
  );
  // A bare function object is accepted too.
  assert.is(render(m0, true, PIN, [WEATHER_TOOL.function]), render(m0, true));
});

test("thinking mode: default on; enable_thinking/thinking false off; precedence thinking_mode > enable_thinking > thinking", () => {
  const tail = (kwargs: Record<string, unknown>) => {
    const text = render(m0, true, { ...PIN, ...kwargs }, []);
    return text.endsWith("<｜Assistant｜><think>")
      ? "<think>"
      : text.endsWith("<｜Assistant｜></think>")
        ? "</think>"
        : text;
  };
  assert.is(tail({}), "<think>");
  assert.is(tail({ enable_thinking: false }), "</think>");
  assert.is(tail({ thinking: false }), "</think>");
  assert.is(tail({ enable_thinking: true, thinking: false }), "<think>");
  assert.is(tail({ enable_thinking: false, thinking: true }), "</think>");
  assert.is(tail({ thinking_mode: "thinking", thinking: false }), "<think>");
  assert.is(tail({ thinking_mode: "chat" }), "</think>");
  assert.is(tail({ thinking_mode: null, enable_thinking: null }), "<think>", "None counts as absent");
  assert.throws(() => tail({ thinking_mode: "fast" }), /thinking_mode/);
  assert.throws(() => tail({ reasoning_effort: "max" }), /reasoning_effort/, "unknown kwargs are rejected");
});

test("add_generation_prompt=false strips the opener only", () => {
  const user = [...m0];
  assert.is(render(user, true), render(user, false) + "<｜Assistant｜><think>");
  assert.is(
    render(user, true, { ...PIN, thinking: false }),
    render(user, false, { ...PIN, thinking: false }) + "<｜Assistant｜></think>",
  );
  const tool = [...m0, twoCalls, { role: "tool", content: "sunny" }, { role: "tool", content: "rain" }];
  assert.is(render(tool, true), render(tool, false) + "\n\n<think>");
  assert.ok(render(tool, false).endsWith("</function_results>"));
  assert.is(
    render(tool, true, { ...PIN, thinking: false }),
    render(tool, false, { ...PIN, thinking: false }) + "\n\n</think>",
  );
  // Partial results and an assistant tail have no opener to strip.
  const partial = tool.slice(0, -1);
  assert.is(render(partial, false), render(partial, true));
  assert.ok(render(partial, true).endsWith("<result>sunny</result>"));
  assert.is(render([...m0, twoCalls], false), render([...m0, twoCalls], true));
});

test("more tool results than calls, or a result with no assistant before it, throw", () => {
  const three = [...m0, twoCalls, ...["a", "b", "c"].map((c) => ({ role: "tool", content: c }))];
  assert.throws(() => render(three, true), /tool result 3 answers an assistant that made 2 tool calls/);
  assert.throws(() => render([...m0, { role: "tool", content: "x" }], true), /must follow an assistant/);
  assert.throws(() => render([...m0, { role: "robot", content: "x" }], true), /role "robot"/);
});

test("arguments as an object or a JSON string render the same; inputs are not mutated", () => {
  const asObject: ChatMessage = {
    ...twoCalls,
    tool_calls: [
      { id: "c1", type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } },
      { id: "c2", type: "function", function: { name: "get_weather", arguments: { city: "Rome" } } },
    ],
  };
  const messages = [...m0, asObject];
  const before = JSON.stringify(messages);
  assert.is(render(messages, true), render([...m0, twoCalls], true));
  assert.is(JSON.stringify(messages), before);
  const typed = render(
    [...m0, { ...twoCalls, tool_calls: [{ function: { name: "f", arguments: { n: 2, ok: true, l: [1, "ü"] } } }] }],
    true,
  );
  assert.ok(typed.includes('string="false">2<') && typed.includes('string="false">[1, "ü"]<'), typed);
});

test("drop_thinking=false keeps history reasoning and is append-only across a user append; true is not", () => {
  const turn1 = [...m0, { role: "assistant", content: "Sunny.", reasoning_content: "easy" }];
  const turn2 = [...turn1, { role: "user", content: "thanks" }];
  assert.ok(render(turn2, true).startsWith(render(turn1, false)), "pinned: append-only");
  assert.ok(render(turn2, true).includes("<think>easy</think>Sunny."));
  const drop = { drop_thinking: true };
  assert.not.ok(render(turn2, true, drop).startsWith(render(turn1, false, drop)), "upstream drops old reasoning");
  assert.ok(render(turn2, true, drop).includes("<｜User｜>Paris and Rome?<｜Assistant｜></think>Sunny."));
  // Upstream's check: after the last user, a thinking-mode assistant needs reasoning or tool calls.
  assert.throws(
    () => render([...m0, { role: "assistant", content: "x" }], false, drop),
    /needs reasoning or tool calls/,
  );
  // A pure tool loop (no user after the calls) renders the same either way.
  const loop = [...m0, twoCalls, { role: "tool", content: "sunny" }, { role: "tool", content: "rain" }];
  assert.is(render(loop, true, drop), render(loop, true));
});

/** Plays one engine turn: the completion is the family's own text for `reply` + EOS. */
function play(t: Trajectory, ctx: PromptContext, fam: TitoFamily, request: ChatMessage[], reply: ChatMessage) {
  const plan = planPrompt(ctx, t, request, tools);
  const completionIds = [...folder.encode(fam.formatCompletion(reply as never, ctx.kwargs)), EOS];
  t.commit({ promptIds: plan.promptIds, completionIds, messages: [...request, reply], tools }, fam.maxTrimTokens);
  return plan;
}

/** The drift report of the trajectory against a canonical render of its messages. */
const drift = (t: Trajectory, kwargs = PIN) =>
  compareTrajectories(folder, family, folder.encode(render([...t.messages], false, kwargs)), t.currentIds);

for (const kwargs of [PIN, { ...PIN, thinking: false }]) {
  test(`TITO loop (${JSON.stringify(kwargs)}): 2 parallel calls, tool run, tool+user, system, user`, () => {
    const ctx = promptContext(folder, family, kwargs);
    const t = new Trajectory("v32");
    play(t, ctx, family, m0, twoCalls);
    const r2 = [
      ...t.messages,
      { role: "tool", tool_call_id: "c1", content: "sunny" },
      { role: "tool", tool_call_id: "c2", content: "rain" },
    ];
    const steps: ChatMessage[][] = [
      r2,
      [
        { role: "tool", tool_call_id: "c3", content: "cloudy" },
        { role: "user", content: "And tomorrow?" },
      ],
      [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Summary?" },
      ],
      [{ role: "user", content: "Thanks." }],
    ];
    const replies: ChatMessage[] = [
      { role: "assistant", content: "", reasoning_content: "one more", tool_calls: [call("c3", "Oslo")] },
      { role: "assistant", content: "Rain tomorrow.", reasoning_content: "look it up" },
      { role: "assistant", content: "Sunny, rain, cloudy.", reasoning_content: "" },
      { role: "assistant", content: "You're welcome.", reasoning_content: "polite" },
    ];
    steps.forEach((appended, i) => {
      const request = i === 0 ? appended : [...t.messages, ...appended];
      const before = [...t.currentIds];
      const plan = play(t, ctx, family, request, replies[i]!);
      assert.equal(Array.from(plan.promptIds).slice(0, before.length), before, `turn ${i + 2} extends the checkpoint`);
      assert.equal(
        Array.from(plan.promptIds),
        folder.encode(render(request, true, kwargs)),
        `turn ${i + 2} equals the canonical prompt`,
      );
      assert.equal(drift(t, kwargs), [], `turn ${i + 2} has no drift`);
    });
  });
}

test("rendering a tool run alone would lose its opener when a user follows: why V3.2 diffs the real history", () => {
  const history = [...m0, twoCalls];
  const appended = [
    { role: "tool", content: "sunny" },
    { role: "tool", content: "rain" },
    { role: "user", content: "ok?" },
  ];
  const whole = render([...history, ...appended], true).slice(render(history, false).length);
  assert.ok(
    whole.startsWith("\n\n<function_results>") && whole.includes("</function_results>\n\n<think><｜User｜>ok?"),
    whole,
  );
  const segments = { ...family, increment: "segments" as const };
  const t = new Trajectory("seg");
  play(t, promptContext(folder, segments, PIN), segments, m0, twoCalls);
  const plan = planPrompt(promptContext(folder, segments, PIN), t, [...history, ...appended], tools);
  const text = folder.decode(Array.from(plan.promptIds).slice(t.currentIds.length));
  assert.ok(text.includes("</function_results><｜User｜>ok?"), "segment by segment the opener is missing: " + text);
});

test("a request's thinking:true replaces a server enable_thinking:false (one alias group); the pin stays", () => {
  for (const fam of [family, selectFamily(deepseekFolder("deepseek_v4"))]) {
    const kwargs = new TurnKwargs(fam, serverKwargs(fam, { enable_thinking: false }));
    const merged = kwargs.of({ thinking: true });
    assert.equal(merged, { drop_thinking: false, thinking: true });
    assert.ok(render(m0, true, merged).endsWith("<｜Assistant｜><think>"));
    assert.ok(render(m0, true, kwargs.base).endsWith("<｜Assistant｜></think>"));
  }
});

test("against the synthetic base, user, tool, assistant+user, two assistants+user render the real suffix (text)", () => {
  const segments = { ...family, increment: "segments" as const };
  const appends: ChatMessage[][] = [
    [{ role: "user", content: "More?" }],
    [
      { role: "tool", tool_call_id: "c1", content: "sunny" },
      { role: "tool", tool_call_id: "c2", content: "rain" },
    ],
    [
      { role: "assistant", content: "Injected.", reasoning_content: "i" },
      { role: "user", content: "More?" },
    ],
    [
      { role: "assistant", content: "One.", reasoning_content: "" },
      { role: "assistant", content: "Two.", reasoning_content: "2" },
      { role: "user", content: "More?" },
    ],
  ];
  for (const appended of appends) {
    const t = new Trajectory("synthetic");
    play(t, promptContext(folder, segments, PIN), segments, m0, twoCalls);
    const request = [...t.messages, ...appended];
    const plan = planPrompt(promptContext(folder, segments, PIN), t, request, tools);
    // The text is the real suffix. The ids are not after a tool run: its "</function_results>"
    // and the generation prompt's "\n\n<think>" meet in plain text, and encoded apart they give
    // ">" + "\n\n" where the whole render has ">\n\n" (the other reason V3.2 diffs the history).
    assert.is(folder.decode(Array.from(plan.promptIds)), render(request, true), JSON.stringify(appended));
    const sameIds = JSON.stringify(Array.from(plan.promptIds)) === JSON.stringify(folder.encode(render(request, true)));
    assert.is(sameIds, appended[0]!.role !== "tool", JSON.stringify(appended));
  }
});

test("the appended messages rendered alone are the diff of the two full renders; thinking with drop_thinking is left to them", () => {
  const histories: [ChatMessage[], unknown[]][] = [
    [[...m0, twoCalls], tools],
    [[m0[1]!, twoCalls], tools], // no system message: the tools go into a new one first
    [[...m0, { role: "assistant", content: "Done.", reasoning_content: "r" }], []],
  ];
  const appends: ChatMessage[][] = [
    [{ role: "user", content: "More?" }],
    [{ role: "tool", tool_call_id: "c1", content: "sunny" }],
    [
      { role: "tool", tool_call_id: "c1", content: "sunny" },
      { role: "tool", tool_call_id: "c2", content: "rain" },
      { role: "user", content: "And Oslo?" },
    ],
    [{ role: "system", content: "Be brief." }],
    [
      { role: "assistant", content: "One.", reasoning_content: "" },
      { role: "user", content: "More?" },
    ],
  ];
  const modes = [PIN, { drop_thinking: false, thinking: false }, { drop_thinking: true, thinking: false }];
  let compared = 0;
  for (const [history, t] of histories)
    for (const appended of appends)
      for (const kwargs of modes) {
        const request = [...history, ...appended];
        let full: string;
        try {
          full = render(request, true, kwargs, t);
        } catch {
          continue; // e.g. a tool result after an assistant with no calls: the full render refuses it
        }
        const short = render(history, false, kwargs, t);
        assert.ok(full.startsWith(short));
        const alone = appendedDeepseekV32(request, history.length, { tools: t, addGenerationPrompt: true, kwargs });
        assert.is(alone, full.slice(short.length), `${JSON.stringify(appended)} ${JSON.stringify(kwargs)}`);
        compared++;
      }
  assert.ok(compared >= 25, `compared ${compared}`);
  const dropping = { drop_thinking: true, thinking: true };
  const request = [...m0, twoCalls, { role: "user", content: "More?" }];
  assert.is(appendedDeepseekV32(request, 3, { tools, addGenerationPrompt: true, kwargs: dropping }), undefined);
});

test("drift classes: count, type, assistant text (soft), non-assistant text (hard)", () => {
  const ids = (m: ChatMessage[]) => folder.encode(render(m, false));
  const base = [...m0, { role: "assistant", content: "Sunny.", reasoning_content: "r" }];
  const expected = ids(base);
  assert.equal(compareTrajectories(folder, family, expected, expected), []);
  const types = (actual: number[]) => compareTrajectories(folder, family, expected, actual).map((m) => m.type);
  assert.equal(types(ids([...m0, { role: "assistant", content: "Cloudy.", reasoning_content: "r" }])), [
    "assistant_text",
  ]);
  assert.equal(types(ids([m0[0]!, { role: "user", content: "Rome?" }, base[2]!])), ["non_assistant_text"]);
  assert.equal(types(expected.filter((id) => id !== USER)), ["special_token_count"]);
  assert.equal(types(expected.map((id) => (id === USER ? ASSISTANT : id))), ["special_token_type"]);
  // BOS/EOS and the think tags are not drift specials: an EOS more is text in the assistant segment.
  assert.equal(types([...expected.slice(0, -1), EOS, EOS]), ["assistant_text"]);
});

test.run();
