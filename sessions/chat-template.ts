// Renders a conversation with the tokenizer folder's chat template (@huggingface/jinja, set
// up as transformers sets up jinja2: jinja-python.ts). Prepares messages as SGLang's
// serving_chat.py does before apply_chat_template (python/sglang/srt/entrypoints/openai/
// serving_chat.py, `_apply_jinja_template`, sgl-project/sglang@0b9c3848), on a copy, never
// the caller's objects: content null -> "", keys whose value is null left out
// (process_content_for_template_format), tool-call `arguments` given as a JSON string read
// as JSON, numbers and key order kept (lossless-json.ts). Content-part lists (text parts
// only: the session core refuses others first, checkContent) reach a template whose
// content format is "openai" as lists; any other renderer gets their texts joined by " "
// (prompt-builder.ts renderOrThrow, template-analysis.ts).
import type { Template } from "@huggingface/jinja";
import { InvalidChatRequestError, TokenizerLoadError } from "./errors.ts";
import { compileTemplate, renderTemplate } from "./jinja-python.ts";
import { parseJsonLossless } from "./lossless-json.ts";
import { carriesMessageState, contentFormat, type ContentFormat } from "./template-analysis.ts";
import type { TokenizerFolder } from "./tokenizer-folder.ts";

export type ChatMessage = Record<string, unknown> & { role: string };

export interface RenderOptions {
  tools?: unknown[] | null;
  addGenerationPrompt: boolean;
  /** Chat-template kwargs (e.g. `{ enable_thinking: false }`), passed to every render. */
  kwargs?: Record<string, unknown>;
}

/** Renders messages to text: a jinja template, or a renderer written in code (DeepSeek's encoders). */
export interface ChatRenderer {
  render(messages: readonly ChatMessage[], options: RenderOptions): string;
  /** The compiled jinja template, when it is one (the generation-prompt proof reads it). */
  readonly template?: Template;
  /** "openai": content-part lists reach the renderer as lists; absent or "string": as their texts joined by " ". */
  readonly contentFormat?: ContentFormat;
  /**
   * The folder's own template carries state from message to message (template-analysis.ts):
   * appended messages are rendered as a diff of full renders, not against a synthetic context.
   */
  readonly carriesState?: boolean;
  /**
   * For a renderer whose appended messages are a diff of the real history (a family's
   * `increment: "history"`): what rendering all of `messages` with the generation prompt
   * adds to rendering their first `kept` without it, from the appended messages alone
   * (the full renders of both grew with the history on every turn). Undefined when the
   * earlier messages may render differently once more follow: then the full renders decide.
   */
  readonly renderAppended?: (
    messages: readonly ChatMessage[],
    kept: number,
    options: RenderOptions,
  ) => string | undefined;
}

const compiled = new WeakMap<TokenizerFolder, Template>();
const compiledSources = new Map<string, Template>();
const formats = new WeakMap<Template, ContentFormat>();

/** The folder's compiled template (parsed once per folder). */
export function templateOf(folder: TokenizerFolder): Template {
  let template = compiled.get(folder);
  if (!template) {
    if (folder.chatTemplate === "")
      throw new TokenizerLoadError(
        `tokenizer folder ${folder.dir} has no chat template: neither tokenizer_config.json's chat_template nor chat_template.jinja`,
      );
    template = compileTemplate(folder.chatTemplate);
    formats.set(template, contentFormat(folder.chatTemplate));
    compiled.set(folder, template);
  }
  return template;
}

/** A jinja renderer: the folder's own template, or `source` (a family's fixed template) with the folder's tokens. */
export function jinjaRenderer(folder: TokenizerFolder, source?: string): ChatRenderer {
  let template: Template;
  if (source === undefined) template = templateOf(folder);
  else {
    template = compiledSources.get(source) ?? compileTemplate(source);
    if (!formats.has(template)) formats.set(template, contentFormat(source));
    compiledSources.set(source, template);
  }
  return {
    template,
    contentFormat: formats.get(template),
    carriesState: source === undefined && carriesMessageState(folder.chatTemplate),
    render: (messages, options) => renderWith(template, folder, messages, options),
  };
}

/** Parses a JSON-string `arguments` into an object; anything else is returned as is. */
export function normalizeArguments(args: unknown): unknown {
  if (typeof args !== "string") return args;
  try {
    const parsed = parseJsonLossless(args);
    return parsed !== null && typeof parsed === "object" ? parsed : args;
  } catch {
    return args;
  }
}

function normalizeToolCall(call: unknown): unknown {
  if (!call || typeof call !== "object") return call;
  const c = call as Record<string, unknown>;
  const fn = c.function as Record<string, unknown> | undefined;
  if (fn && typeof fn === "object" && "arguments" in fn) {
    return { ...c, function: { ...fn, arguments: normalizeArguments(fn.arguments) } };
  }
  if ("arguments" in c) return { ...c, arguments: normalizeArguments(c.arguments) };
  return c;
}

const isTextPart = (part: unknown): part is { type: "text"; text: string } =>
  !!part &&
  typeof part === "object" &&
  (part as { type?: unknown }).type === "text" &&
  typeof (part as { text?: unknown }).text === "string";

/**
 * Throws InvalidChatRequestError unless `content` is a string, null/absent, or a list of
 * OpenAI text parts (`{"type": "text", "text": "…"}`). The prompt is rendered from text
 * only: an image, audio or file part would be dropped or rendered as JSON, a silently
 * wrong prompt, so it is refused. `where` names the message (`messages[2]`).
 */
export function checkContent(content: unknown, where: string): void {
  if (!Array.isArray(content)) return;
  content.forEach((part: unknown, i) => {
    if (isTextPart(part)) return;
    const type = part && typeof part === "object" ? (part as { type?: unknown }).type : undefined;
    throw new InvalidChatRequestError(
      typeof type === "string" && type !== "text"
        ? `${where}.content[${i}] is a '${type}' part, which is not supported: only text parts ({"type": "text", "text": "…"}) can be rendered into the prompt`
        : `${where}.content[${i}] must be a text part {"type": "text", "text": "<string>"}`,
    );
  });
}

/**
 * The text a content value renders as: a list of text parts becomes their texts joined by
 * one space (as SGLang flattens list content for a template that takes strings), so it
 * renders to the same ids as that string. Anything else is returned as it is.
 */
export function contentText(content: unknown): unknown {
  if (!Array.isArray(content) || !content.every(isTextPart)) return content;
  return content.map((part) => part.text).join(" ");
}

/** The messages with every list of text parts as its texts joined by " " (SGLang's "string" content format). */
export function joinTextParts(messages: readonly ChatMessage[]): readonly ChatMessage[] {
  if (!messages.some((m) => Array.isArray(m.content))) return messages;
  return messages.map((m) => (Array.isArray(m.content) ? { ...m, content: contentText(m.content) } : m));
}

/** A text part as SGLang passes it to an "openai" template: its type and text only. */
const textPart = (part: unknown): unknown => (isTextPart(part) ? { type: "text", text: part.text } : part);

/** A render-ready copy of one message (SGLang: content null -> "", then null-valued keys left out). */
export function normalizeMessage(message: ChatMessage): ChatMessage {
  const out: ChatMessage = { ...message };
  if (out.content === null || out.content === undefined) out.content = "";
  for (const key of Object.keys(out)) if (out[key] === null) delete out[key];
  if (Array.isArray(out.content)) out.content = out.content.map(textPart);
  if (Array.isArray(out.tool_calls)) out.tool_calls = out.tool_calls.map(normalizeToolCall);
  return out;
}

/** The render context's entries that are the same for every request: special tokens, then kwargs. */
export function fixedContext(folder: TokenizerFolder, kwargs?: Record<string, unknown>): Record<string, unknown> {
  const config = folder.config;
  const text = (v: unknown) => (typeof v === "string" ? v : ((v as { content?: string } | undefined)?.content ?? ""));
  return {
    bos_token: text(config.bos_token),
    eos_token: text(config.eos_token),
    pad_token: text(config.pad_token),
    unk_token: text(config.unk_token),
    ...kwargs,
  };
}

const LEADING_NEWLINES = /^\n+/;
const TRAILING_NEWLINES = /\n+$/;
const onText = (strip: (s: string) => string) => (value: unknown) => (typeof value === "string" ? strip(value) : value);
const lstripNl = (s: string) => s.replace(LEADING_NEWLINES, "");
const rstripNl = (s: string) => s.replace(TRAILING_NEWLINES, "");

/**
 * Functions every render's context provides: Python's `lstrip('\n')`, `rstrip('\n')` and
 * `strip('\n')`, which @huggingface/jinja's argument-less strips cannot say. The
 * Qwen3-family templates call them; written as jinja macros they cost a string slice per
 * call (O(length) in the library) and most of a tool segment's render.
 */
const NEWLINE_STRIPS: Readonly<Record<string, (value: unknown) => unknown>> = {
  lstrip_nl: onText(lstripNl),
  rstrip_nl: onText(rstripNl),
  strip_nl: onText((s) => rstripNl(lstripNl(s))),
};

/** The names of those functions (test/crosscheck/render.py defines the same for Python). */
export const NEWLINE_STRIP_NAMES: readonly string[] = Object.keys(NEWLINE_STRIPS);

export function renderChat(folder: TokenizerFolder, messages: readonly ChatMessage[], options: RenderOptions): string {
  return renderWith(templateOf(folder), folder, messages, options);
}

function renderWith(
  template: Template,
  folder: TokenizerFolder,
  messages: readonly ChatMessage[],
  options: RenderOptions,
): string {
  const flat = formats.get(template) === "openai" ? messages : joinTextParts(messages);
  const context: Record<string, unknown> = {
    ...NEWLINE_STRIPS,
    ...fixedContext(folder, options.kwargs),
    messages: flat.map(normalizeMessage),
    add_generation_prompt: options.addGenerationPrompt,
  };
  if (options.tools && options.tools.length > 0) context.tools = options.tools;
  return renderTemplate(template, context);
}
