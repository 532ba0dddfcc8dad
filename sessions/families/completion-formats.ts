// The completion formats of the families whose completions are tagged text, as data that
// tagged-completion.ts parses by (and completion-stream.ts streams by). Each one names the
// SGLang parsers it follows; the house rules are in tagged-completion.ts.
import type { ReasoningTags, TaggedFormat, ToolCallBlocks } from "./tagged-completion.ts";

type Kwargs = Readonly<Record<string, unknown>> | undefined;
const enableThinking = (kwargs: Kwargs) => kwargs?.enable_thinking !== false;

// The engine may or may not put the stop token's text at the end of the completion.
const CHATML_STOPS = ["<|im_end|>", "<|endoftext|>"];

/**
 * SGLang's `qwen3` reasoning split. Newlines around the reasoning are stripped: the templates
 * write "<think>\n" + r.strip("\n") + "\n</think>", so stripping exactly those renders the
 * model's own think block again. Reasoning ends at the first `</think>`, or at a
 * `<tool_call>` when it never closes.
 */
const QWEN3_THINK: Omit<ReasoningTags, "promptOpened" | "loneClose"> = {
  open: "<think>",
  close: "</think>",
  opener: "repeated",
  callEnds: "unclosed",
  strip: "newlines",
};

/** `<think>` tags as Kimi and MiniMax write them: one opener at the very start, kept as written, ended by a first call. */
const EXACT_THINK = { open: "<think>", close: "</think>", opener: "exact", callEnds: "first", strip: "none" } as const;

const QWEN3_CALLS: ToolCallBlocks = { open: "<tool_call>", close: "</tool_call>", syntax: "json", content: "trimmed" };
const CODER_CALLS: ToolCallBlocks = { ...QWEN3_CALLS, syntax: "qwen3-coder", content: "between-calls" };

/**
 * Qwen3 (hybrid thinking): the prompt opens no block. With thinking on, a `</think>` with
 * no `<think>` means the prompt opened it after all (Qwen3-Thinking templates); with
 * `enable_thinking: false` the prompt closed the block, so such a `</think>` is text.
 */
export const QWEN3_FORMAT: TaggedFormat = {
  stopTexts: CHATML_STOPS,
  reasoning: { ...QWEN3_THINK, promptOpened: () => false, loneClose: (k) => (enableThinking(k) ? "text" : false) },
  toolCalls: QWEN3_CALLS,
};

/** Qwen3-Next / Qwen3-Thinking-2507: the generation prompt always opens the think block. */
export const QWENNEXT_FORMAT: TaggedFormat = {
  stopTexts: CHATML_STOPS,
  reasoning: { ...QWEN3_THINK, promptOpened: () => true },
  toolCalls: QWEN3_CALLS,
};

/** Qwen3.5: Qwen3's split (the prompt opens the block while thinking is on), Qwen3-Coder XML calls. */
export const QWEN35_FORMAT: TaggedFormat = {
  stopTexts: CHATML_STOPS,
  reasoning: { ...QWEN3_THINK, promptOpened: enableThinking },
  toolCalls: CODER_CALLS,
};

/**
 * Nemotron 3 (SGLang `nemotron_3`): as Qwen3.5, but leading newlines are stripped and the
 * trailing one KEPT (nemotron3.ts says why), and with thinking off a `</think>` before any
 * call still ends a reasoning.
 */
export const NEMOTRON3_FORMAT: TaggedFormat = {
  stopTexts: CHATML_STOPS,
  reasoning: { ...QWEN3_THINK, strip: "leading-newlines", promptOpened: enableThinking, loneClose: () => "trimmed" },
  toolCalls: CODER_CALLS,
};

/**
 * GLM-4.7 / GLM-5 (SGLang `glm45` reasoning, `glm47` calls): the prompt ends `<think>`
 * (thinking on), so the output starts inside the reasoning, which `</think>` or a first
 * `<tool_call>` ends, trimmed; the content is all text outside the calls, trimmed.
 */
export const GLM47_FORMAT: TaggedFormat = {
  stopTexts: ["<|observation|>", "<|user|>", "<|endoftext|>"],
  reasoning: {
    open: "<think>",
    close: "</think>",
    opener: "one",
    callEnds: "first",
    strip: "whitespace",
    promptOpened: enableThinking,
  },
  toolCalls: { open: "<tool_call>", close: "</tool_call>", syntax: "glm", content: "trimmed" },
};

/**
 * MiniMax M2.5 / M2.7 (SGLang `minimax-append-think` reasoning, `minimax-m2` calls). The
 * prompt ends `<think>\n`; the reasoning parser does not split: it puts `<think>` back in
 * front and returns everything as content, and the template re-splits that content at
 * `</think>` when the message comes back. Blocks are looked for after the reasoning only
 * (a `<minimax:tool_call>` the model merely thought about is not a call); the content is
 * not trimmed.
 */
export const MINIMAX_FORMAT: TaggedFormat = {
  stopTexts: ["[e~["],
  reasoning: { ...EXACT_THINK, promptOpened: () => true, keep: "content" },
  toolCalls: { open: "<minimax:tool_call>", close: "</minimax:tool_call>", syntax: "minimax", content: "verbatim" },
};

/**
 * Kimi K2.5 / K2.6 (SGLang `kimi_k2`): the prompt ends inside `<think>` (thinking on); a
 * repeated `<think>` is only the tag again; `</think>` or the tool-call section ends the
 * reasoning, kept as written. With `thinking: false` everything is content. The sections
 * themselves are Kimi's own (kimi-completion.ts); `toolCalls` here names their tags for
 * the reasoning split and the stream.
 */
export const KIMI_FORMAT = {
  stopTexts: ["<|im_end|>"],
  reasoning: { ...EXACT_THINK, promptOpened: (kwargs: Kwargs) => (kwargs?.thinking !== false ? true : undefined) },
  sections: { open: "<|tool_calls_section_begin|>", close: "<|tool_calls_section_end|>" },
} as const satisfies { stopTexts: readonly string[]; reasoning: ReasoningTags; sections: object };

/** Gemma 3: no reasoning, no tool calls; the content is the text without its stop texts. */
export const GEMMA3_FORMAT: TaggedFormat = { stopTexts: ["<end_of_turn>", "<eos>"] };

/** Llama 3.x's stop texts (its calls are bare JSON: llama3-completion.ts). */
export const LLAMA3_STOP_TEXTS = ["<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"];
