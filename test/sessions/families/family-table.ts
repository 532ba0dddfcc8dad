// Every family as one row of data for the table-driven suite (families.test.ts): the folder
// it is tested on, the settings it must have (docs/models.md, "The families"), boundary and drift-segment
// cases, the tokenizers it must refuse, and the TITO loops it must play with no drift. A
// family's own oddities (templates, parsers, worked examples) are in its own test file.
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import type { MismatchType } from "../../../sessions/drift.ts";
import type { AssistantTurn, TitoFamilyName } from "../../../sessions/families/index.ts";
import type { TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { deepseekFolder, syntheticDeepseekFolder } from "../../helpers/deepseek-folder.ts";
import { syntheticFolder } from "../../helpers/synthetic-tokenizer.ts";
import { npmFolder, qwen3 } from "../fixtures.ts";
import { nemotron3Folder, qwen35Folder, qwennextFolder } from "./chatml-folders.ts";
import { call, result, tool, twoQuestionHistory, types, WEATHER_BOT } from "./family-fixtures.ts";
import { glm47Folder, minimaxFolder } from "./glm-minimax-folders.ts";
import type { LoopScript } from "./tito-loop.ts";
import { llama31Folder, LLAMA3_PLAIN_TEMPLATE } from "./llama3-folder.ts";
import { gptossInklingFolder, inklingFolder, kimiFolder } from "./kimi-inkling-folders.ts";

/** A token: its text (a single token of the folder, or text that encodes to one) or its id. */
export type Token = string | number;

export interface LoopCase extends LoopScript {
  label: string;
  /** Another folder than the row's. */
  folder?: () => TokenizerFolder;
  /** The first rounds whose prompt equals a fresh render of the request (default: all). */
  fresh?: number;
  /** The drift classes after the given number of rounds (default: none after the last). */
  drift?: Record<number, MismatchType[]>;
  /** The decoded increment of a round's prompt: what follows the checkpoint and the boundary ids. */
  increments?: Record<number, string>;
  /** The ids of the calls the client got in a round (the model's own, where the family keeps them). */
  callIds?: Record<number, string[]>;
  /** How a round's completion text ends (the stop token's text included). */
  tails?: Record<number, string>;
  /** The trajectory decodes to the canonical render of its messages. */
  canonical?: boolean;
}

export interface FamilyRow {
  name: TitoFamilyName;
  folder: () => TokenizerFolder;
  /** What detectFamily says of the folder (default: the row's name). */
  detected?: TitoFamilyName;
  maxTrimTokens: number;
  trailing: Token[];
  appendRoles: string[];
  pinnedKwargs: Record<string, unknown>;
  sglangParsers: { reasoning?: string; toolCall?: string };
  stopTokens: string[];
  /** "fixed": the family's own template; "folder": the folder's; "code": a renderer in code. */
  renders: "fixed" | "folder" | "code";
  increment?: "history";
  kwargAliases?: string[][];
  /** Exactly these ids split drift segments (absent: not checked here). */
  driftSpecials?: Token[];
  /** boundaryIds(accumulated) → ids. */
  boundary: Array<[Token[], Token[]]>;
  /** boundaryDrop(accumulated) → count; absent: the family has no boundaryDrop. */
  drop?: Array<[Token[], number]>;
  /** isAssistantSegment(prevSpecial, text) → expected. */
  segments: Array<[Token | undefined, string, boolean]>;
  /** Folders the family must refuse, and what the error names. */
  refuses: Array<[() => TokenizerFolder, RegExp]>;
  loops: LoopCase[];
}

const ALL_ROLES = ["tool", "user", "system", "assistant"];
const NO_SYSTEM = ["tool", "user", "assistant"];
const answer = (content: string, reasoning_content?: string): AssistantTurn =>
  reasoning_content === undefined ? { content } : { content, reasoning_content };
const oneCall = (reasoning: string, name: string, args: Record<string, unknown>): AssistantTurn => ({
  content: "",
  reasoning_content: reasoning,
  tool_calls: [call(name, args)],
});

/** The loop most families play: two calls, their results, a user question, one call, its result and appends. */
function standardLoop(
  label: string,
  stop: string,
  first: AssistantTurn,
  o: Partial<LoopCase> & { tools: unknown[]; appends: ChatMessage[]; city?: Record<string, unknown> },
): LoopCase {
  const { appends, city = { city: "Rome", days: 1 }, ...rest } = o;
  return {
    label,
    stop,
    history: twoQuestionHistory(),
    rounds: [
      { turn: first },
      { append: [result(0, "sunny"), result(1, "3 results")], turn: answer("Paris is sunny.", "Summarize.") },
      { append: [{ role: "user", content: "And Rome tomorrow?" }], turn: oneCall("One call.", "get_weather", city) },
      { append: [result(0, "rain"), ...appends], turn: answer("Rain in Rome.", "Wrap up.") },
    ],
    ...rest,
  };
}

// --- ChatML: qwen3, qwennext, qwen35, nemotron3
const QWEN3_TOOLS = [tool("get_weather", types({ city: "string", days: "integer" }), "Weather in a city")];
export const QWEN3_TWO_CALLS: AssistantTurn = {
  content: "Let me check both.",
  reasoning_content: "Two cities, two lookups.",
  tool_calls: [call("get_weather", { city: "Paris" }, "a"), call("get_weather", { city: "Zürich", days: 2 }, "b")],
};
const chatml = () => ({
  maxTrimTokens: 0,
  trailing: ["\n"],
  stopTokens: ["<|im_end|>"],
  boundary: [
    [["<|im_end|>"], ["\n"]],
    [[1, 2, "<|im_end|>"], ["\n"]],
    [["<|im_end|>", 1], []],
    [[1, "<|im_end|>", 2], []],
    [[], []],
  ] as Array<[Token[], Token[]]>,
  segments: [
    ["<|im_start|>", "assistant\n<think>\nr", true],
    ["<|im_start|>", "user\nhi", false],
    ["<|im_start|>", "system\n", false],
    ["<|im_end|>", "\n", false],
    [undefined, "assistant", false],
  ] as Array<[Token | undefined, string, boolean]>,
});
/** qwen3 and qwennext: ChatML, every role, clear_thinking pinned, SGLang's qwen3/qwen25, a fixed template. */
const QWEN3_SETTINGS = {
  ...chatml(),
  appendRoles: ALL_ROLES,
  pinnedKwargs: { clear_thinking: false },
  sglangParsers: { reasoning: "qwen3", toolCall: "qwen25" },
  renders: "fixed" as const,
};
const QWEN35_TOOLS = [
  tool("get_weather", types({ city: "string", days: "integer", hourly: "boolean" })),
  tool("search", types({ query: "string", filters: "object" })),
];
const NEMOTRON_TOOLS = [tool("get_weather", types({ city: "string", days: "integer" }))];
const QWENNEXT_TOOLS = [tool("get_weather", types({ city: "string" }))];
const imEnd = "<|im_end|>";

// --- the others' tools
const GLM_TOOLS = [
  tool("get_weather", types({ city: "string", days: "integer" })),
  tool("search", types({ query: "string", filters: "object", tags: "array", exact: "boolean" })),
];
export const MINIMAX_TOOLS = [
  tool("get_weather", {
    ...types({ city: "string", days: "integer" }),
    hours: { anyOf: [{ type: "number" }, { type: "null" }] },
    unit: { enum: ["c", "f"] },
  }),
  tool("search", types({ query: "string", filters: "object", exact: "boolean" })),
];
export const KIMI_TOOLS = [
  tool("get_weather", types({ city: "string", days: "integer" }), "Weather of a city"),
  tool("search", types({ query: "string" })),
];
export const INKLING_TOOLS = [tool("get_weather", types({ days: "integer", City: "string" })), tool("search")];
export const LLAMA3_TOOLS = [
  tool("get_weather", types({ city: "string", days: "integer" })),
  tool("search", types({ query: "string" })),
];
const twoCalls = (content: string, reasoning: string, ...calls: ReturnType<typeof call>[]): AssistantTurn => ({
  content,
  reasoning_content: reasoning,
  tool_calls: calls,
});
/** What each family's loop and its own test file start from: the declared tools, a first turn with two calls, the first request. */
export const FIXTURES = {
  qwen3: { tools: QWEN3_TOOLS, twoCalls: QWEN3_TWO_CALLS, history: twoQuestionHistory("Weather in Paris and Zürich?") },
  qwennext: {
    tools: QWENNEXT_TOOLS,
    twoCalls: twoCalls(
      "Checking both.",
      "Two cities.",
      call("get_weather", { city: "Paris" }),
      call("get_weather", { city: "Rome" }),
    ),
    history: twoQuestionHistory("Weather in Paris and Rome?"),
  },
  qwen35: {
    tools: QWEN35_TOOLS,
    twoCalls: twoCalls(
      "Let me check.",
      "Two lookups.",
      call("get_weather", { city: "Paris", days: 2, hourly: true }),
      call("search", { query: "Rome 42", filters: { lang: "it", n: [1, 2] } }),
    ),
    history: [
      { role: "system", content: `  ${WEATHER_BOT}\n` },
      { role: "user", content: "Weather in Paris, and search Rome? " },
    ] as ChatMessage[],
  },
  nemotron3: {
    tools: NEMOTRON_TOOLS,
    twoCalls: twoCalls(
      "Let me check.",
      "Two lookups.\n",
      call("get_weather", { city: "Paris", days: 2 }),
      call("get_weather", { city: "Rome" }),
    ),
    history: twoQuestionHistory("Weather in Paris and Rome?"),
  },
  glm47: {
    tools: GLM_TOOLS,
    twoCalls: twoCalls(
      "Let me check both.",
      "Two lookups needed.",
      call("get_weather", { city: "Paris", days: 2 }),
      call("search", { query: "Rome 42", filters: { lang: "it", n: 3 }, tags: ["a", "b"], exact: true }),
    ),
    history: twoQuestionHistory(),
  },
  minimax: {
    tools: MINIMAX_TOOLS,
    twoCalls: twoCalls(
      "Let me check both.",
      "Two lookups needed.",
      call("get_weather", { city: "Paris", days: 2 }),
      call("search", { query: "Rome 42", filters: { lang: "it", n: 3 }, exact: true }),
    ),
    history: twoQuestionHistory(),
  },
  // The model's own call ids, as the template prints them back.
  kimi: {
    tools: KIMI_TOOLS,
    twoCalls: twoCalls(
      "Let me check both.",
      "Two lookups needed.",
      call("get_weather", { city: "Paris", days: 2 }, "functions.get_weather:0"),
      call("search", { query: "Rome ☀", filters: { n: [1, 2] } }, "functions.search:1"),
    ),
    history: twoQuestionHistory(),
  },
  // inkling.test.ts's template cases want the description (the loops' tools have none).
  inkling: {
    tools: [tool("get_weather", types({ days: "integer", City: "string" }), "Weather of a city"), tool("search")],
    twoCalls: twoCalls(
      "Let me check both.",
      "Two lookups needed.",
      call("get_weather", { days: 2, City: "Paris" }, "call_a"),
      call("search", { query: "Rome ☀", filters: { z: [1, { b: 2, a: null }], _: true } }, "call_b"),
    ),
    history: twoQuestionHistory(),
  },
  llama3: {
    tools: LLAMA3_TOOLS,
    twoCalls: twoCalls(
      "Let me check both.",
      "Two lookups needed.",
      call("get_weather", { city: "Paris", days: 2 }),
      call("search", { query: 'Rome "é" 42' }),
    ),
    history: twoQuestionHistory(),
  },
};

/** A turn's calls without ids: the model writes its own (loops check the ids the client gets). */
const withoutIds = (turn: AssistantTurn): AssistantTurn => ({
  ...turn,
  tool_calls: turn.tool_calls!.map(({ id: _, ...c }) => c),
});

type Fixture = { tools: unknown[]; twoCalls: AssistantTurn; history: ChatMessage[] };

/** The short ChatML loop: two calls and their results, then a system and a user append and one call (and more rounds). */
function briefLoop(
  label: string,
  f: Fixture,
  summary: string,
  question: string,
  one: AssistantTurn,
  ...more: LoopCase["rounds"]
): LoopCase {
  return {
    label,
    stop: imEnd,
    tools: f.tools,
    history: f.history,
    rounds: [
      { turn: f.twoCalls },
      { append: [result(0, "sunny"), result(1, "rain")], turn: answer("Sunny, rain.", summary) },
      {
        append: [
          { role: "system", content: "Be brief." },
          { role: "user", content: question },
        ],
        turn: one,
      },
      ...more,
    ],
  };
}

/** The worked example of a ChatML thinking family (qwen3's loop): one call, then the tool increment the next prompt gets. */
function workedExample(label: string, f: Fixture, reasoning: string, increment: string, tail?: string): LoopCase {
  return {
    label,
    stop: imEnd,
    tools: f.tools,
    history: f.history,
    rounds: [
      { turn: oneCall(reasoning, "get_weather", { city: "Paris" }) },
      { append: [result(0, "sunny")], turn: answer("Sunny.", reasoning) },
    ],
    increments: { 1: increment },
    ...(tail === undefined ? {} : { tails: { 0: tail } }),
  };
}

const kimiLoop = (label: string): LoopCase =>
  standardLoop(label, imEnd, withoutIds(FIXTURES.kimi.twoCalls), {
    tools: KIMI_TOOLS,
    appends: [
      { role: "system", content: "Answer in one line." },
      { role: "assistant", content: "(injected note)" },
      { role: "user", content: "Summary?" },
    ],
    callIds: { 0: ["functions.get_weather:0", "functions.search:1"] },
  });
const inklingLoop = (label: string, folder?: () => TokenizerFolder): LoopCase =>
  standardLoop(label, "<|content_model_end_sampling|>", withoutIds(FIXTURES.inkling.twoCalls), {
    tools: INKLING_TOOLS,
    folder,
    city: { City: "Rome", days: 1 },
    appends: [
      { role: "system", content: "Answer in one line." },
      { role: "assistant", content: "(injected note)" },
      { role: "user", content: "Summary?" },
    ],
    canonical: true,
  });
const llama3Loop = (label: string, folder?: () => TokenizerFolder): LoopCase => ({
  label,
  folder,
  stop: "<|eot_id|>",
  tools: LLAMA3_TOOLS,
  history: twoQuestionHistory(),
  rounds: [
    {
      turn: {
        content: "",
        tool_calls: FIXTURES.llama3.twoCalls.tool_calls,
      },
    },
    { append: [result(0, "sunny"), result(1, "42")], turn: answer("Paris is sunny; Rome is 42.") },
    {
      append: [{ role: "user", content: "And tomorrow?" }],
      turn: { content: "Let me look.", tool_calls: [call("get_weather", { city: "Paris", days: 1 })] },
    },
    { append: [result(0, "rain"), { role: "system", content: "Answer in one word." }], turn: answer("Rain.") },
    {
      append: [
        { role: "assistant", content: "Anything else?" },
        { role: "user", content: "No." },
      ],
      turn: answer("Bye."),
    },
  ],
});
const kimiRow = (name: "kimi25" | "kimi26", model: "K2.5" | "K2.6"): FamilyRow => ({
  name,
  folder: () => kimiFolder({ model }),
  maxTrimTokens: 0,
  trailing: [],
  appendRoles: ALL_ROLES,
  pinnedKwargs: { preserve_thinking: true },
  sglangParsers: name === "kimi26" ? { reasoning: "kimi_k2", toolCall: "kimi_k2_raw_id" } : {},
  stopTokens: [imEnd],
  renders: name === "kimi26" ? "folder" : "fixed",
  boundary: [[[1, 2, imEnd], []]],
  segments: [
    ["<|im_assistant|>", "assistant<|im_middle|><think>r", true],
    ["<|tool_call_argument_begin|>", '{"city":"X"}', true],
    ["<|im_user|>", "user<|im_middle|>hi", false],
    ["<|im_system|>", "tool<|im_middle|>## Return of x", false],
    [undefined, "assistant", false],
  ],
  refuses: [
    [() => kimiFolder({ model: "K2.6", without: "<|tool_call_argument_begin|>" }), /<\|tool_call_argument_begin\|>/],
    ...(name === "kimi26" ? ([[() => kimiFolder({ model: "K2.5" }), /preserve_thinking/]] as const) : []),
  ] as Array<[() => TokenizerFolder, RegExp]>,
  loops: [kimiLoop(`${name} loop`)],
});
const minimaxRow = (name: "minimax_m25" | "minimax_m27", model: "MiniMax-M2.5" | "MiniMax-M2.7"): FamilyRow => ({
  name,
  folder: () => minimaxFolder(model),
  maxTrimTokens: 0,
  trailing: ["\n"],
  appendRoles: NO_SYSTEM,
  pinnedKwargs: { clear_thinking: false },
  sglangParsers: { reasoning: "minimax-append-think", toolCall: "minimax-m2" },
  stopTokens: ["[e~["],
  renders: "fixed",
  boundary: [
    [[1, 2, "[e~["], ["\n"]],
    [[1, "[e~[", 2], []],
    [[], []],
  ],
  segments: [
    ["]~b]", "ai\n<think>\nr", true],
    ["]~b]", "user\nhi", false],
    ["[e~[", "\n", false],
  ],
  refuses: [[() => minimaxFolder(model, "[e~["), /\[e~\[/]],
  loops: [
    standardLoop(`${name} loop`, "[e~[", FIXTURES.minimax.twoCalls, {
      tools: MINIMAX_TOOLS,
      appends: [
        { role: "assistant", content: "(injected note)" },
        { role: "user", content: "Summary?" },
      ],
    }),
  ],
});
const deepseekRow = (name: "deepseekv32" | "deepseekv4"): FamilyRow => {
  const v4 = name === "deepseekv4";
  return {
    name,
    folder: v4 ? () => syntheticDeepseekFolder("deepseek_v4") : () => deepseekFolder("deepseek_v32"),
    maxTrimTokens: 0,
    trailing: v4 ? ["<｜Assistant｜>", "<think>", "</think>"] : [],
    appendRoles: v4 ? NO_SYSTEM : ALL_ROLES,
    pinnedKwargs: { drop_thinking: false },
    kwargAliases: [["thinking_mode", "enable_thinking", "thinking"]],
    sglangParsers: v4
      ? { reasoning: "deepseek-v4", toolCall: "deepseekv4" }
      : { reasoning: "deepseek-v3", toolCall: "deepseekv32" },
    stopTokens: ["<｜end▁of▁sentence｜>"],
    renders: "code",
    increment: "history",
    driftSpecials: ["<｜User｜>", "<｜Assistant｜>"],
    boundary: [
      [[1, 2, "<｜end▁of▁sentence｜>"], []],
      [["<｜end▁of▁sentence｜>"], []],
    ],
    segments: [
      ["<｜Assistant｜>", "x", true],
      ["<｜User｜>", "x", false],
      [undefined, "<｜Assistant｜>", false],
    ],
    // DeepSeek V3's own tokenizer has no <think>.
    refuses: v4 ? [] : [[() => npmFolder("deepseek_v3"), /<think>/]],
    loops: [],
  };
};
export const FAMILY_ROWS: FamilyRow[] = [
  {
    name: "default",
    folder: () => npmFolder("deepseek_v3"),
    maxTrimTokens: 0,
    trailing: [],
    appendRoles: ALL_ROLES,
    pinnedKwargs: {},
    sglangParsers: {},
    stopTokens: ["<｜end▁of▁sentence｜>"],
    renders: "folder",
    boundary: [[[1, "<｜end▁of▁sentence｜>"], []]],
    segments: [
      ["<｜Assistant｜>", "Hello", true],
      ["<｜User｜>", "hi", false],
    ],
    refuses: [],
    loops: [],
  },
  {
    name: "qwen3",
    folder: qwen3,
    ...QWEN3_SETTINGS,
    refuses: [
      [
        () => syntheticFolder({ added: [{ content: "<|im_start|>" }], template: "{{ messages }}" }),
        /qwen3 needs <\|im_start\|>, <\|im_end\|>/,
      ],
    ],
    loops: [
      {
        label: "qwen3 loop",
        stop: imEnd,
        tools: QWEN3_TOOLS,
        history: twoQuestionHistory("Weather in Paris and Zürich?"),
        rounds: [
          { turn: QWEN3_TWO_CALLS },
          { append: [result(0, "sunny"), result(1, "rain")], turn: answer("Sunny and rain.", "Summarize.") },
          {
            append: [{ role: "user", content: "And Oslo in 3 days?" }],
            turn: oneCall("One call.", "get_weather", { city: "Oslo", days: 3 }),
          },
          {
            append: [
              result(0, "snow"),
              { role: "system", content: "Answer in one line." },
              { role: "user", content: "Summary?" },
            ],
            turn: answer("Snow in Oslo.", "Wrap up."),
          },
        ],
        increments: {
          1: "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
        },
      },
    ],
  },
  {
    name: "qwennext",
    folder: qwennextFolder,
    ...QWEN3_SETTINGS,
    refuses: [],
    loops: [
      briefLoop(
        "qwennext loop",
        FIXTURES.qwennext,
        "Done.",
        "Oslo?",
        oneCall("Call.", "get_weather", { city: "Oslo" }),
      ),
      workedExample(
        "qwennext worked example: the increment after a tool call ends in the opened think block",
        FIXTURES.qwennext,
        "Look it up.",
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n",
      ),
    ],
  },
  {
    name: "qwen35",
    folder: () => qwen35Folder(),
    ...chatml(),
    appendRoles: NO_SYSTEM,
    pinnedKwargs: { clear_thinking: false },
    sglangParsers: { reasoning: "qwen3", toolCall: "qwen3_coder" },
    renders: "fixed",
    refuses: [[() => qwen35Folder(imEnd), /<\|im_end\|>/]],
    loops: [
      {
        ...standardLoop("qwen35 loop", imEnd, FIXTURES.qwen35.twoCalls, {
          tools: QWEN35_TOOLS,
          appends: [
            { role: "assistant", content: "(injected note)" },
            { role: "user", content: "Summary?" },
          ],
          increments: {
            1: "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n3 results\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n",
          },
        }),
        history: FIXTURES.qwen35.history,
      },
    ],
  },
  {
    name: "nemotron3",
    folder: () => nemotron3Folder(),
    ...chatml(),
    segments: [...chatml().segments, ["<|im_start|>", "assistant", false]],
    appendRoles: ALL_ROLES,
    pinnedKwargs: { truncate_history_thinking: false },
    sglangParsers: { reasoning: "nemotron_3", toolCall: "qwen3_coder" },
    renders: "folder",
    refuses: [[() => nemotron3Folder("<|im_start|>"), /<\|im_start\|>/]],
    loops: [
      {
        ...briefLoop(
          "nemotron3 loop",
          FIXTURES.nemotron3,
          "Sum up.\n",
          "Oslo in 3 days?",
          oneCall("Call.\n", "get_weather", { city: "Oslo", days: 3 }),
          // No reasoning: the model writes `<think>\n</think>`, the template `<think></think>`: soft drift only.
          { append: [result(0, "snow")], turn: answer("Snow.") },
        ),
        fresh: 3,
        drift: { 3: [], 4: ["assistant_text"] },
      },
      workedExample(
        "nemotron3 worked example: completion tail </tool_call>\\n<|im_end|>, the newline put back, the tool increment",
        FIXTURES.nemotron3,
        "Look.\n",
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n<think>\n",
        "</tool_call>\n<|im_end|>",
      ),
    ],
  },
  {
    name: "glm47",
    folder: () => glm47Folder(),
    maxTrimTokens: 1,
    trailing: ["<|observation|>", "<|user|>"],
    appendRoles: ALL_ROLES,
    pinnedKwargs: { clear_thinking: false },
    sglangParsers: { reasoning: "glm45", toolCall: "glm47" },
    stopTokens: ["<|observation|>", "<|user|>"],
    renders: "folder",
    boundary: [[[1, 2, "<|observation|>"], []]],
    drop: [
      [[1, 2, "<|observation|>"], 1],
      [[1, 2, "<|user|>"], 1],
      [[1, "<|user|>", 2], 0],
      [["<|assistant|>"], 0],
      [[], 0],
    ],
    segments: [
      ["<|assistant|>", "</think>x", true],
      ["<|user|>", "hello", false],
      [undefined, "<|assistant|>", false],
    ],
    refuses: [[() => glm47Folder({ without: "<|observation|>" }), /<\|observation\|>/]],
    loops: [GLM47_LOOP()],
  },
  kimiRow("kimi25", "K2.5"),
  kimiRow("kimi26", "K2.6"),
  minimaxRow("minimax_m25", "MiniMax-M2.5"),
  minimaxRow("minimax_m27", "MiniMax-M2.7"),
  deepseekRow("deepseekv32"),
  deepseekRow("deepseekv4"),
  {
    name: "inkling",
    folder: () => inklingFolder(),
    maxTrimTokens: 0,
    trailing: [],
    appendRoles: ALL_ROLES,
    pinnedKwargs: {},
    sglangParsers: { reasoning: "inkling", toolCall: "inkling" },
    stopTokens: ["<|content_model_end_sampling|>"],
    renders: "fixed",
    increment: "history",
    driftSpecials: [200000, 200001, 200002, 200003],
    boundary: [[[1, "<|content_model_end_sampling|>"], []]],
    segments: [
      ["<|message_model|>", "<|content_text|>hi", true],
      ["<|message_user|>", "<|content_text|>hi", false],
    ],
    refuses: [[() => inklingFolder("<|content_invoke_tool_json|>"), /<\|content_invoke_tool_json\|>/]],
    loops: [inklingLoop("inkling loop"), inklingLoop("inkling loop on the gpt-oss BPE", gptossInklingFolder)],
  },
  {
    name: "llama3",
    folder: () => npmFolder("llama3_1"),
    maxTrimTokens: 0,
    trailing: [],
    appendRoles: ALL_ROLES,
    pinnedKwargs: { date_string: "26 Jul 2024" },
    sglangParsers: { toolCall: "llama3" },
    // Llama 3's tokenizer has no <|eom_id|> (llama31Folder's has: llama3.test.ts).
    stopTokens: ["<|eot_id|>"],
    renders: "fixed",
    boundary: [
      [[1, 2, "<|eot_id|>"], []],
      [[], []],
    ],
    segments: [
      ["<|start_header_id|>", "assistant<|end_header_id|>\n\nHi", true],
      ["<|start_header_id|>", "user<|end_header_id|>\n\nHi", false],
    ],
    refuses: [
      [
        () => syntheticFolder({ added: [{ content: "<|eot_id|>" }], template: LLAMA3_PLAIN_TEMPLATE }),
        /<\|start_header_id\|>, <\|end_header_id\|>/,
      ],
    ],
    loops: [llama3Loop("llama3 loop (npm Llama 3)"), llama3Loop("llama3 loop (synthetic Llama 3.1)", llama31Folder)],
  },
  {
    name: "gemma3",
    folder: () => npmFolder("gemma3"),
    maxTrimTokens: 0,
    trailing: ["\n"],
    appendRoles: ["user"],
    pinnedKwargs: {},
    sglangParsers: {},
    stopTokens: ["<end_of_turn>", "<eos>"],
    renders: "folder",
    increment: "history",
    boundary: [
      [[2, 5, "<end_of_turn>"], ["\n"]],
      [[2, 5, 6], []],
      [[], []],
    ],
    segments: [
      ["<start_of_turn>", "model\nHi", true],
      ["<start_of_turn>", "user\nHi", false],
    ],
    refuses: [
      [
        () => syntheticFolder({ added: [{ content: "<end_of_turn>" }], template: "{{ messages }}" }),
        /<start_of_turn>, <end_of_turn>/,
      ],
    ],
    loops: [
      {
        label: "gemma3 loop: user turns",
        stop: "<end_of_turn>",
        history: [
          { role: "system", content: "You are terse." },
          { role: "user", content: "Hi there." },
        ],
        rounds: [
          { turn: answer("Hello.") },
          { append: [{ role: "user", content: "What is 2+2?" }], turn: answer("  4  ") },
          { append: [{ role: "user", content: "And 3+3?" }], turn: answer("6.") },
          { append: [{ role: "user", content: "Thanks." }], turn: answer("You're welcome.") },
        ],
      },
    ],
  },
];

/** GLM-4.7's loop: tool run, user append, and a system append after a failed call (glm47.test.ts checks more of it). */
export function GLM47_LOOP(): LoopCase {
  return {
    label: "glm47 loop",
    stop: "<|user|>",
    tools: GLM_TOOLS,
    history: twoQuestionHistory(),
    rounds: [
      {
        turn: FIXTURES.glm47.twoCalls,
        stop: "<|observation|>",
      },
      { append: [result(0, "sunny"), result(1, "3 results")], turn: answer("Paris is sunny.", "Summarize.") },
      {
        append: [{ role: "user", content: "And tomorrow in Rome?" }],
        turn: oneCall("One call.", "get_weather", { city: "Rome", days: 1 }),
        stop: "<|observation|>",
      },
      // The call failed: the harness answers with a system message instead of a tool result.
      {
        append: [{ role: "system", content: "The weather service is down." }],
        turn: answer("Sorry, I cannot check Rome now."),
      },
    ],
    // The last turn's empty reasoning the template writes as a bare </think>: soft drift.
    fresh: 3,
    drift: { 4: ["assistant_text"] },
  };
}
