// The incremental completion parser (sessions/completion-stream.ts) on every family that
// parses completions: completions the family itself writes (formatCompletion), cut into
// pieces of every size, give deltas whose sum is exactly the parse of the whole text; a tool
// call comes out only once its block has closed; reasoning and content come out while the
// text is still arriving; a tail that may start a marker or a stop string, or ends in an
// unfinished character, waits for the next piece.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { CompletionStream, type CompletionDelta } from "../../sessions/completion-stream.ts";
import { StreamDivergedError } from "../../sessions/errors.ts";
import { selectFamily, type AssistantTurn, type TitoFamily } from "../../sessions/families/index.ts";
import { qwen3, WEATHER_TOOL } from "./fixtures.ts";
import { glm47Folder, minimaxFolder } from "./families/glm-minimax-folders.ts";
import { syntheticDeepseekFolder } from "../helpers/deepseek-folder.ts";
import { nemotron3Folder, qwen35Folder, qwennextFolder } from "./families/chatml-folders.ts";
import { inklingFolder, kimiFolder } from "./families/kimi-inkling-folders.ts";
import { npmFolder } from "./fixtures.ts";

const SEARCH_TOOL = {
  type: "function",
  function: {
    name: "search",
    parameters: { type: "object", properties: { q: { type: "string" }, n: { type: "integer" } } },
  },
};
const tools = [WEATHER_TOOL, SEARCH_TOOL];

const TURNS: AssistantTurn[] = [
  { content: "The weather in Paris is sunny, 21 °C." },
  { content: "Sure.", reasoning_content: "The user wants the weather.\nI know it." },
  { content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris" } } }] },
  {
    content: "Let me look that up <not a tag> for you.",
    reasoning_content: "Two calls are needed.",
    tool_calls: [
      { function: { name: "get_weather", arguments: { city: "Zürich 🌤" } } },
      { function: { name: "search", arguments: { q: "a < b && c > d", n: 3 } } },
    ],
  },
];

interface Case {
  name: string;
  family: TitoFamily;
  kwargs: Record<string, unknown>;
  /** Text before a bare </think> is reasoning (qwen3, thinking on): a text not opening with <think> waits. */
  retroactive?: boolean;
}

const CASES: Case[] = [
  { name: "qwen3", family: selectFamily(qwen3(), "qwen3"), kwargs: {}, retroactive: true },
  { name: "qwen3 (thinking off)", family: selectFamily(qwen3(), "qwen3"), kwargs: { enable_thinking: false } },
  { name: "default", family: selectFamily(qwen3(), "default"), kwargs: {} },
  { name: "glm47", family: selectFamily(glm47Folder(), "glm47"), kwargs: {} },
  { name: "minimax_m25", family: selectFamily(minimaxFolder("MiniMax-M2.5"), "minimax_m25"), kwargs: {} },
  { name: "deepseekv32", family: selectFamily(syntheticDeepseekFolder("deepseek_v32"), "deepseekv32"), kwargs: {} },
  { name: "deepseekv4", family: selectFamily(syntheticDeepseekFolder("deepseek_v4"), "deepseekv4"), kwargs: {} },
  { name: "qwennext", family: selectFamily(qwennextFolder(), "qwennext"), kwargs: {} },
  { name: "qwen35", family: selectFamily(qwen35Folder(), "qwen35"), kwargs: {} },
  { name: "qwen35 (thinking off)", family: selectFamily(qwen35Folder(), "qwen35"), kwargs: { enable_thinking: false } },
  { name: "nemotron3", family: selectFamily(nemotron3Folder(), "nemotron3"), kwargs: {} },
  { name: "kimi26", family: selectFamily(kimiFolder({ model: "K2.6" }), "kimi26"), kwargs: {} },
  { name: "inkling", family: selectFamily(inklingFolder(), "inkling"), kwargs: {} },
  { name: "llama3", family: selectFamily(npmFolder("llama3_1"), "llama3"), kwargs: {} },
];

function ids() {
  let n = 0;
  return () => `call_${++n}`;
}

interface Run {
  sum: CompletionDelta;
  /** For each delta: the text length appended when it came, and the delta. */
  steps: Array<{ at: number; delta: CompletionDelta }>;
  parsed: ReturnType<CompletionStream["finish"]>["parsed"];
}

function run(c: Case, text: string, size: (i: number) => number, stop?: string[]): Run {
  const stream = new CompletionStream(c.family, { tools, kwargs: c.kwargs, newId: ids(), stop });
  const sum: CompletionDelta = { reasoning: "", content: "", toolCalls: [] };
  const steps: Run["steps"] = [];
  const add = (at: number, delta: CompletionDelta) => {
    sum.reasoning += delta.reasoning;
    sum.content += delta.content;
    sum.toolCalls.push(...delta.toolCalls);
    steps.push({ at, delta });
  };
  let at = 0;
  for (let i = 0; at < text.length; i++) {
    const piece = text.slice(at, at + size(i));
    at += piece.length;
    add(at, stream.append(piece));
  }
  const { delta, parsed } = stream.finish(text);
  add(text.length, delta);
  return { sum, steps, parsed };
}

const SIZES: Array<[string, (i: number) => number]> = [
  ["1", () => 1],
  ["2", () => 2],
  ["3", () => 3],
  ["mixed", (i) => [1, 5, 2, 9, 4][i % 5]!],
  ["whole", () => 1e9],
];

for (const c of CASES) {
  test(`${c.name}: deltas in pieces of any size add up to the parse of the whole text`, () => {
    const texts = TURNS.map((t) => c.family.formatCompletion(t, c.kwargs));
    texts.push(texts[3]! + (c.family.stopTokens[0] ?? ""));
    texts.push(texts[3]!.slice(0, -5)); // a length cut inside the last block
    for (const text of texts)
      for (const [label, size] of SIZES) {
        const { sum, steps, parsed } = run(c, text, size);
        const where = `${c.name}, pieces of ${label}: ${JSON.stringify(text)}`;
        assert.equal(parsed, c.family.parseCompletion(text, { tools, kwargs: c.kwargs, newId: ids() }), where);
        assert.is(sum.content, parsed.content, where);
        assert.is(sum.reasoning, parsed.reasoning_content ?? "", where);
        assert.equal(
          sum.toolCalls.map(
            ({ index, ...call }) => (assert.is(index, sum.toolCalls.indexOf(sum.toolCalls[index]!)), call),
          ),
          parsed.tool_calls ?? [],
          where,
        );
        // Text flows: a long content or reasoning starts coming out before the text is whole.
        if (label === "1" && !(c.retroactive && !text.startsWith("<think>")))
          for (const key of ["content", "reasoning"] as const)
            if ((key === "content" ? parsed.content : (parsed.reasoning_content ?? "")).length >= 10)
              assert.ok(
                steps.slice(0, -1).some((s) => s.delta[key] !== ""),
                `${where}: no ${key} before the end`,
              );
        // A tool call comes out only once the text up to then holds its whole block.
        for (const { at, delta } of steps)
          for (const call of delta.toolCalls) {
            const one = c.family.parseCompletion(text.slice(0, at), { tools, kwargs: c.kwargs, newId: ids() });
            assert.ok((one.tool_calls?.length ?? 0) > call.index, `${where}: call ${call.index} early at ${at}`);
          }
      }
  });
}

test("qwen3: reasoning, then content, flow while the text arrives; a call waits for its block", () => {
  const c = CASES[0]!;
  const text = c.family.formatCompletion(TURNS[3]!, {});
  const { steps } = run(c, text, () => 1);
  const firstOf = (pick: (d: CompletionDelta) => boolean) => steps.find((s) => pick(s.delta))?.at ?? -1;
  const thinkEnd = text.indexOf("</think>");
  const callEnd = text.indexOf("</tool_call>") + "</tool_call>".length;
  assert.ok(firstOf((d) => d.reasoning !== "") < thinkEnd, "reasoning before </think>");
  assert.ok(firstOf((d) => d.content !== "") < text.indexOf("<tool_call>"), "content before the first call");
  assert.is(
    firstOf((d) => d.toolCalls.length > 0),
    callEnd,
    "the call right when its block closes",
  );
});

test("qwen3, thinking off: plain content flows, a bare </think> stays content", () => {
  const c = CASES[1]!;
  const text = "Hello there, world. It is </think> fine.";
  const { steps, sum } = run(c, text, () => 1);
  assert.ok(steps.find((s) => s.delta.content !== "")!.at <= "Hello ".length + 1);
  assert.is(sum.content, text);
  // With thinking on, the same text turns out to be reasoning: nothing comes out before the </think>.
  const on = run(CASES[0]!, text, () => 1);
  const first = on.steps.find((s) => s.delta.content !== "" || s.delta.reasoning !== "")!;
  assert.is(first.at, text.indexOf("</think>") + "</think>".length);
  assert.is(on.sum.reasoning, "Hello there, world. It is ");
  assert.is(on.sum.content, "fine.");
});

test("a tail that may start a marker, a stop string, or ends in an unfinished character is held", () => {
  const c = CASES[1]!; // qwen3, thinking off: text flows to content
  const stream = new CompletionStream(c.family, { kwargs: c.kwargs, stop: ["STOP HERE"] });
  assert.is(stream.append("Hello").content, "Hello");
  assert.is(stream.append(" <tool").content, "", "a partial opener, and the space before it");
  assert.is(stream.append("box> and STOP").content, " <toolbox> and", "not an opener after all; a stop prefix held");
  assert.is(stream.append(" THERE \uFFFD").content, " STOP THERE", "an unfinished character held");
  assert.is(stream.append("!").content, " \uFFFD!");
  const { delta, parsed } = stream.finish("Hello <toolbox> and STOP THERE \uFFFD!");
  assert.equal(delta, { reasoning: "", content: "", toolCalls: [] });
  assert.is(parsed.content, "Hello <toolbox> and STOP THERE \uFFFD!");
});

test("the engine's final text may drop a stop string the stream held; a divergence is a coded error", () => {
  const c = CASES[1]!;
  const stream = new CompletionStream(c.family, { kwargs: c.kwargs, stop: ["Observation:"] });
  stream.append("The result is 4.\nObs");
  assert.is(stream.finish("The result is 4.\n").parsed.content, "The result is 4.");
  const diverged = new CompletionStream(c.family, { kwargs: c.kwargs });
  assert.is(diverged.append("Hello world").content, "Hello world");
  assert.throws(
    () => diverged.finish("Goodbye"),
    (err: unknown) => err instanceof StreamDivergedError,
  );
});

test("a family without stream markers sends everything at the end", () => {
  const family: TitoFamily = { ...CASES[0]!.family, streamSyntax: undefined };
  const { steps, sum, parsed } = run({ name: "bare", family, kwargs: {} }, "<think>\nr\n</think>\n\nHi", () => 2);
  assert.is(steps.filter((s) => s.delta.content || s.delta.reasoning).length, 1);
  assert.is(sum.content, parsed.content);
  assert.is(sum.reasoning, "r");
});
test.run();
