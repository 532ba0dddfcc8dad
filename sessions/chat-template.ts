// Renders a conversation with the tokenizer folder's chat template (@huggingface/jinja).
// Normalizes on a copy, never the caller's objects: content null -> "", tool-call
// `arguments` given as a JSON string -> an object (templates index arguments as objects).
// Content-part lists reach the template as they are (the session core refuses non-text
// parts first, checkContent; prompt-builder.ts renderOrThrow joins them, contentText, for
// a template that cannot take a list).
import { Template } from "@huggingface/jinja";
import { InvalidChatRequestError, TokenizerLoadError } from "./errors.ts";
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
}

const compiled = new WeakMap<TokenizerFolder, Template>();
const compiledSources = new Map<string, Template>();

/** The folder's compiled template (parsed once per folder). */
export function templateOf(folder: TokenizerFolder): Template {
  let template = compiled.get(folder);
  if (!template) {
    if (folder.chatTemplate === "")
      throw new TokenizerLoadError(
        `tokenizer folder ${folder.dir} has no chat template: neither tokenizer_config.json's chat_template nor chat_template.jinja`,
      );
    template = new Template(folder.chatTemplate);
    compiled.set(folder, template);
  }
  return template;
}

/** A jinja renderer: the folder's own template, or `source` (a family's fixed template) with the folder's tokens. */
export function jinjaRenderer(folder: TokenizerFolder, source?: string): ChatRenderer {
  let template: Template;
  if (source === undefined) template = templateOf(folder);
  else {
    template = compiledSources.get(source) ?? new Template(source);
    compiledSources.set(source, template);
  }
  return { template, render: (messages, options) => renderWith(template, folder, messages, options) };
}

/** Parses a JSON-string `arguments` into an object; anything else is returned as is. */
export function normalizeArguments(args: unknown): unknown {
  if (typeof args !== "string") return args;
  try {
    const parsed = JSON.parse(args);
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

/** A render-ready copy of one message. */
export function normalizeMessage(message: ChatMessage): ChatMessage {
  const out: ChatMessage = { ...message };
  if (out.content === null || out.content === undefined) out.content = "";
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

export function renderChat(folder: TokenizerFolder, messages: readonly ChatMessage[], options: RenderOptions): string {
  return renderWith(templateOf(folder), folder, messages, options);
}

function renderWith(
  template: Template,
  folder: TokenizerFolder,
  messages: readonly ChatMessage[],
  options: RenderOptions,
): string {
  const context: Record<string, unknown> = {
    ...NEWLINE_STRIPS,
    ...fixedContext(folder, options.kwargs),
    messages: messages.map(normalizeMessage),
    add_generation_prompt: options.addGenerationPrompt,
  };
  if (options.tools && options.tools.length > 0) context.tools = options.tools;
  return template.render(context);
}
