// DeepSeek completions parsed back into messages (dsml-completion.ts through the families):
// round trips through the encoders (the parsed message must render as the text the model
// generated, and formatCompletion must write that text), V3.2's lenient and V4's strict
// DSML rules, malformed blocks kept in the content and counted, length cuts.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { encodeDeepseekV32 } from "../../../sessions/families/deepseekv32-encoder.ts";
import { encodeDeepseekV4 } from "../../../sessions/families/deepseekv4-encoder.ts";
import { selectFamily, type ParsedCompletion, type TitoFamily } from "../../../sessions/families/index.ts";
import { syntheticDeepseekFolder } from "../../helpers/deepseek-folder.ts";
import { WEATHER_TOOL } from "../fixtures.ts";

const v32 = selectFamily(syntheticDeepseekFolder("deepseek_v32"));
const v4 = selectFamily(syntheticDeepseekFolder("deepseek_v4"));
const tools = [WEATHER_TOOL];
const PIN = { drop_thinking: false };
const EOS = "<｜end▁of▁sentence｜>";
const history: ChatMessage[] = [
  { role: "system", content: "You check the weather." },
  { role: "user", content: "Paris and Rome?" },
];
const ids = () => {
  let n = 0;
  return () => `call_${++n}`;
};
/** `t` null: a request with no tool list. */
const parse = (family: TitoFamily, text: string, kwargs: Record<string, unknown> = PIN, t: unknown[] | null = tools) =>
  family.parseCompletion(text, { tools: t ?? undefined, kwargs, newId: ids() });

const assistant: ChatMessage = {
  role: "assistant",
  content: "Checking both.",
  reasoning_content: "Two cities,\n two calls. ",
  tool_calls: [
    { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":" Paris\\n"}' } },
    {
      id: "call_2",
      type: "function",
      function: { name: "get_weather", arguments: '{"city":"Rome","days":2,"units":{"t":"C"},"hourly":false}' },
    },
  ],
};

const asMessage = (p: ParsedCompletion): ChatMessage => {
  const m: ChatMessage = { role: "assistant", content: p.content };
  if (p.reasoning_content !== undefined) m.reasoning_content = p.reasoning_content;
  if (p.tool_calls) m.tool_calls = p.tool_calls;
  return m;
};

const encoders: Array<[string, TitoFamily, typeof encodeDeepseekV32]> = [
  ["deepseekv32", v32, encodeDeepseekV32],
  ["deepseekv4", v4, encodeDeepseekV4],
];

for (const [name, family, encode] of encoders) {
  for (const kwargs of [PIN, { ...PIN, thinking: false }]) {
    test(`${name} round trip ${JSON.stringify(kwargs)}: reasoning, content, two calls`, () => {
      const prompt = encode(history, { tools, addGenerationPrompt: true, kwargs });
      const full = encode([...history, assistant], { tools, addGenerationPrompt: false, kwargs });
      assert.ok(full.startsWith(prompt) && full.endsWith(EOS));
      const generated = full.slice(prompt.length);
      assert.is(
        family.formatCompletion(assistant as never, kwargs) + EOS,
        generated,
        "formatCompletion is the rendered text",
      );
      const parsed = parse(family, generated, kwargs);
      assert.is(parsed.malformedToolCalls, 0);
      const thinking = kwargs === PIN;
      assert.equal(asMessage(parsed), {
        role: "assistant",
        content: "Checking both.",
        ...(thinking ? { reasoning_content: assistant.reasoning_content } : {}),
        tool_calls: (assistant.tool_calls as Array<{ function: { name: string; arguments: string } }>).map((c, i) => ({
          id: `call_${i + 1}`,
          type: "function",
          function: { name: c.function.name, arguments: JSON.stringify(JSON.parse(c.function.arguments)) },
        })),
      });
      // The parsed message renders as the generated text again (without the stop text too).
      const again = encode([...history, asMessage(parse(family, generated.slice(0, -EOS.length), kwargs))], {
        tools,
        addGenerationPrompt: false,
        kwargs,
      });
      assert.is(again, full);
    });
  }

  test(`${name}: plain answers, no calls; a length cut in the reasoning is all reasoning`, () => {
    assert.equal(parse(family, `r</think>Sunny.${EOS}`), {
      content: "Sunny.",
      reasoning_content: "r",
      malformedToolCalls: 0,
    });
    assert.equal(parse(family, "still thinking about"), {
      content: "",
      reasoning_content: "still thinking about",
      malformedToolCalls: 0,
    });
    assert.equal(parse(family, "<think>r</think>x"), { content: "x", reasoning_content: "r", malformedToolCalls: 0 });
    assert.equal(parse(family, "a</think>b", { thinking: false }), { content: "a</think>b", malformedToolCalls: 0 });
  });

  const block = family === v32 ? "function_calls" : "tool_calls";
  const call = (body: string) =>
    `r</think>Let me check.\n\n<｜DSML｜${block}>\n<｜DSML｜invoke name="get_weather">\n${body}\n</｜DSML｜invoke>\n</｜DSML｜${block}>`;

  test(`${name}: a block cut by the length limit stays in the content, uncounted`, () => {
    const cut = call('<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>').slice(0, -30);
    const parsed = parse(family, cut);
    assert.is(parsed.malformedToolCalls, 0);
    assert.is(parsed.tool_calls, undefined);
    assert.ok(parsed.content.startsWith("Let me check.") && parsed.content.includes("<｜DSML｜invoke"));
  });

  test(`${name}: a block whose invoke is broken stays in the content and counts; a good block still parses`, () => {
    const broken = `r</think>\n\n<｜DSML｜${block}>\n<｜DSML｜invoke>\n</｜DSML｜invoke>\n</｜DSML｜${block}>`;
    const good = call('<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>').slice(
      "r</think>".length,
    );
    const parsed = parse(family, broken + good);
    assert.is(parsed.malformedToolCalls, 1);
    assert.equal(
      parsed.tool_calls!.map((c) => c.function.arguments),
      ['{"city":"Paris"}'],
    );
    assert.ok(parsed.content.includes(`<｜DSML｜invoke>`) && parsed.content.includes("Let me check."));
  });

  test(`${name}: content is the text before the block, without the "\\n\\n"; text after it stays`, () => {
    const parsed = parse(family, call("") + "\n\ntrailing" + EOS);
    assert.equal(parsed.tool_calls![0]!.function, { name: "get_weather", arguments: "{}" });
    assert.is(parsed.content, "Let me check.\n\ntrailing");
    const spaced = parse(family, "r</think>  Hi.  " + call("").slice("r</think>Let me check.".length));
    assert.is(spaced.content, family === v32 ? "Hi." : "  Hi.  ");
  });
}

test("deepseekv32 is lenient: DSML-less tags, bare JSON body, missing string attribute, non-JSON values, repeats", () => {
  const parsed = parse(
    v32,
    'r</think>\n\n<function_calls>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n' +
      '<parameter name="days" string="false">two</parameter>\n<parameter name="n">3</parameter>\n<parameter name="n" string="true">4</parameter>\n</invoke>\n' +
      '<｜DSML｜invoke name="get_weather">{"city": "Rome"}</｜DSML｜invoke>\n</function_calls>',
  );
  assert.is(parsed.malformedToolCalls, 0);
  assert.equal(
    parsed.tool_calls!.map((c) => JSON.parse(c.function.arguments)),
    [{ city: "Paris", days: "two", n: "4" }, { city: "Rome" }],
  );
  // Undeclared tools are not V3.2's business.
  assert.is(
    parse(v32, "r</think>\n\n" + blockV32('<｜DSML｜invoke name="other">\n\n</｜DSML｜invoke>'), PIN).tool_calls!
      .length,
    1,
  );
});

function blockV32(inner: string) {
  return `<｜DSML｜function_calls>\n${inner}\n</｜DSML｜function_calls>`;
}

test("deepseekv4 is strict: repeats, bad JSON, a missing string attribute, undeclared tools are malformed", () => {
  const block = (params: string, name = "get_weather") =>
    `r</think>ok\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="${name}">\n${params}\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>`;
  const p = (k: string, v: string, s = "true") =>
    `<｜DSML｜parameter name="${k}" string="${s}">${v}</｜DSML｜parameter>`;
  const cases = [
    block(`${p("city", "Paris")}\n${p("city", "Rome")}`),
    block(p("days", "two", "false")),
    block('<｜DSML｜parameter name="city">Paris</｜DSML｜parameter>'),
    block(p("city", "Paris"), "other_tool"),
    block(p("city", "Paris")).replaceAll("｜DSML｜", ""),
  ];
  for (const text of cases) {
    const parsed = parse(v4, text);
    if (text.includes("｜DSML｜")) assert.is(parsed.malformedToolCalls, 1, text);
    assert.is(parsed.tool_calls, undefined, text);
    assert.ok(parsed.content.startsWith("ok\n\n<"), parsed.content);
  }
  // Without a tool list in the context, names are not checked; with one, they are.
  assert.is(parse(v4, block(p("city", "Paris"), "other_tool"), PIN, null).tool_calls?.length, 1);
  assert.equal(parse(v4, block(`${p("city", "Paris")}\n${p("days", "2", "false")}`)).tool_calls![0]!.function, {
    name: "get_weather",
    arguments: '{"city":"Paris","days":2}',
  });
});

test("a parameter named __proto__ stays a parameter", () => {
  const text = `r</think>\n\n${blockV32('<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="__proto__" string="false">{"a": 1}</｜DSML｜parameter>\n</｜DSML｜invoke>')}`;
  assert.is(parse(v32, text).tool_calls![0]!.function.arguments, '{"__proto__":{"a":1}}');
});

test.run();
