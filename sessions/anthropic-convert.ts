// The Anthropic Messages API in the chat form, and back: the one place that knows both
// shapes (docs/agents.md). A Messages request becomes a chat request — `system` a system
// message, `tool_use` blocks the assistant's tool calls, `tool_result` blocks tool
// messages, `thinking` blocks its reasoning, `tools` with `input_schema` functions with
// `parameters`, and max_tokens / stop_sequences / temperature / top_p / top_k the fields the
// engine reads. A chat reply becomes a `message` (thinking, text and tool_use blocks,
// stop_reason, usage), and a reply's `chat.completion.chunk` events become Anthropic's
// stream events. The mapping is a bijection on what a session stores: the blocks of a
// reply, sent back as history, convert to the stored assistant message again.
// Pure values in and out: no session, no engine, no I/O.
import { randomBytes } from "node:crypto";
import { stringifyLossless } from "./lossless-json.ts";
import { InvalidMessagesRequestError } from "./errors.ts";

type Json = Record<string, unknown>;

/** A Messages request as a chat turn, and what the reply conversion needs to know of it. */
export interface ConvertedRequest {
  /** The chat request (`stream_options.include_usage` set when streamed). */
  chat: Json;
  stream: boolean;
  stopSequences: readonly string[];
  model: string;
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
const bad = (message: string) => new InvalidMessagesRequestError(message);

/** The text of a `string | text block[]` value (a system prompt, a tool result). */
function textOf(value: unknown, where: string): string {
  if (typeof value === "string") return value;
  if (value === undefined || value === null) return "";
  if (!Array.isArray(value)) throw bad(`${where} must be a string or a list of text blocks`);
  return value
    .map((block, i) => {
      if (!isObject(block) || block.type !== "text" || typeof block.text !== "string")
        throw bad(`${where}[${i}] must be a text block (images and documents are not supported)`);
      return block.text;
    })
    .join("");
}

function assistantMessage(content: unknown, where: string): Json {
  if (typeof content === "string") return { role: "assistant", content };
  let text = "";
  let reasoning = "";
  const calls: Json[] = [];
  (content as unknown[]).forEach((block, i) => {
    const at = `${where}.content[${i}]`;
    if (!isObject(block)) throw bad(`${at} must be a content block`);
    if (block.type === "text" && typeof block.text === "string") text += block.text;
    else if (block.type === "thinking" && typeof block.thinking === "string") reasoning += block.thinking;
    else if (block.type === "redacted_thinking")
      return; // opaque: nothing a template renders
    else if (block.type === "tool_use") {
      if (typeof block.id !== "string" || typeof block.name !== "string")
        throw bad(`${at}: a tool_use block needs a string id and name`);
      const input = block.input === undefined ? {} : block.input;
      calls.push({
        id: block.id,
        type: "function",
        function: { name: block.name, arguments: stringifyLossless(input) },
      });
    } else throw bad(`${at}: an assistant message takes text, thinking and tool_use blocks, not ${String(block.type)}`);
  });
  const message: Json = { role: "assistant", content: text };
  if (reasoning !== "") message.reasoning_content = reasoning;
  if (calls.length > 0) message.tool_calls = calls;
  return message;
}

/** A user turn: its tool results as tool messages (in order), then its text as a user message. */
function userMessages(content: unknown, where: string): Json[] {
  if (typeof content === "string") return [{ role: "user", content }];
  const out: Json[] = [];
  let text: string | undefined;
  (content as unknown[]).forEach((block, i) => {
    const at = `${where}.content[${i}]`;
    if (!isObject(block)) throw bad(`${at} must be a content block`);
    if (block.type === "text" && typeof block.text === "string") text = (text ?? "") + block.text;
    else if (block.type === "tool_result") {
      if (typeof block.tool_use_id !== "string") throw bad(`${at}: a tool_result block needs a string tool_use_id`);
      if (text !== undefined) throw bad(`${at}: tool_result blocks come before any text in a user message`);
      out.push({ role: "tool", tool_call_id: block.tool_use_id, content: textOf(block.content, `${at}.content`) });
    } else throw bad(`${at}: a user message takes text and tool_result blocks, not ${String(block.type)}`);
  });
  if (text !== undefined) out.push({ role: "user", content: text });
  return out;
}

function chatTool(tool: unknown, i: number): Json {
  if (!isObject(tool) || typeof tool.name !== "string" || (tool.type !== undefined && tool.type !== "custom"))
    throw bad(`tools[${i}] must be a custom tool with a name and an input_schema (server tools are not supported)`);
  const fn: Json = {
    name: tool.name,
    parameters: isObject(tool.input_schema) ? tool.input_schema : { type: "object" },
  };
  if (typeof tool.description === "string") fn.description = tool.description;
  return { type: "function", function: fn };
}

function toolChoice(choice: unknown): unknown {
  if (!isObject(choice)) throw bad("tool_choice must be an object");
  if (choice.type === "auto") return "auto";
  if (choice.type === "any") return "required";
  if (choice.type === "none") return "none";
  if (choice.type === "tool" && typeof choice.name === "string")
    return { type: "function", function: { name: choice.name } };
  throw bad("tool_choice.type must be auto, any, none or tool (with a name)");
}

/** A Messages request body (parsed JSON) as a chat request; 400 (InvalidMessagesRequestError) when it is not one. */
export function messagesToChat(body: unknown): ConvertedRequest {
  if (!isObject(body)) throw bad("the request body must be a JSON object");
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw bad("the request needs a non-empty `messages` list");
  const messages: Json[] = [];
  if (body.system !== undefined && body.system !== null)
    messages.push({ role: "system", content: textOf(body.system, "system") });
  body.messages.forEach((m: unknown, i: number) => {
    const where = `messages[${i}]`;
    if (!isObject(m) || (typeof m.content !== "string" && !Array.isArray(m.content)))
      throw bad(`${where} must be an object with a string or block-list \`content\``);
    if (m.role === "user") messages.push(...userMessages(m.content, where));
    else if (m.role === "assistant") messages.push(assistantMessage(m.content, where));
    else throw bad(`${where}.role must be "user" or "assistant"`);
  });
  if ((body.messages.at(-1) as Json).role === "assistant")
    throw bad(
      "the last message must be a user message: an assistant prefill is not supported (a turn is the model's own completion)",
    );
  const chat: Json = { messages };
  const model = typeof body.model === "string" ? body.model : "";
  if (model !== "") chat.model = model;
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw bad("`tools` must be a list");
    if (body.tools.length > 0) chat.tools = body.tools.map(chatTool);
  }
  if (body.tool_choice !== undefined) chat.tool_choice = toolChoice(body.tool_choice);
  for (const [from, to] of [
    ["max_tokens", "max_tokens"],
    ["temperature", "temperature"],
    ["top_p", "top_p"],
    ["top_k", "top_k"],
  ] as const) {
    const v = body[from];
    if (v === undefined) continue;
    if (typeof v !== "number") throw bad(`\`${from}\` must be a number`);
    chat[to] = v;
  }
  let stopSequences: string[] = [];
  if (body.stop_sequences !== undefined) {
    if (!Array.isArray(body.stop_sequences) || body.stop_sequences.some((s) => typeof s !== "string"))
      throw bad("`stop_sequences` must be a list of strings");
    stopSequences = body.stop_sequences as string[];
    if (stopSequences.length > 0) chat.stop = stopSequences;
  }
  const stream = body.stream === true;
  if (stream) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  return { chat, stream, stopSequences, model };
}

/** Why the model stopped, in Anthropic's words; `matched` is the stop string the engine names, if any. */
function stopReason(
  finish: unknown,
  matched: unknown,
  request: ConvertedRequest,
): { stop_reason: string; stop_sequence: string | null } {
  if (finish === "tool_calls") return { stop_reason: "tool_use", stop_sequence: null };
  if (finish === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (typeof matched === "string" && request.stopSequences.includes(matched))
    return { stop_reason: "stop_sequence", stop_sequence: matched };
  return { stop_reason: "end_turn", stop_sequence: null };
}

/** A tool call's arguments as a tool_use block's input: the parsed JSON object, else an empty one. */
function inputOf(args: unknown): unknown {
  if (isObject(args)) return args;
  if (typeof args !== "string") return {};
  try {
    const parsed = JSON.parse(args) as unknown;
    return isObject(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

const messageId = (chatId: unknown) =>
  typeof chatId === "string" && chatId !== "" ? `msg_${chatId.replace(/^chatcmpl-/, "")}` : newMessageId();
const newMessageId = () => `msg_${randomBytes(12).toString("hex")}`;

/** The stop string a reply choice names: SGLang's `matched_stop`, vLLM's `stop_reason`. */
const matchedOf = (choice: Json) => choice.matched_stop ?? choice.stop_reason;

/** A `chat.completion` (parsed) as an Anthropic `message`. */
export function chatToMessage(reply: unknown, request: ConvertedRequest): Json {
  const choice = isObject(reply) && Array.isArray(reply.choices) && isObject(reply.choices[0]) ? reply.choices[0] : {};
  const message = isObject(choice.message) ? choice.message : {};
  const content: Json[] = [];
  if (typeof message.reasoning_content === "string" && message.reasoning_content !== "")
    content.push({ type: "thinking", thinking: message.reasoning_content, signature: "" });
  if (typeof message.content === "string" && message.content !== "")
    content.push({ type: "text", text: message.content });
  for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    const fn = isObject(call) && isObject(call.function) ? call.function : {};
    content.push({ type: "tool_use", id: (call as Json).id, name: fn.name, input: inputOf(fn.arguments) });
  }
  const usage = isObject(reply) && isObject(reply.usage) ? reply.usage : {};
  return {
    id: messageId(isObject(reply) ? reply.id : undefined),
    type: "message",
    role: "assistant",
    model: request.model || (isObject(reply) && typeof reply.model === "string" ? reply.model : ""),
    content,
    ...stopReason(choice.finish_reason, matchedOf(choice), request),
    usage: { input_tokens: usage.prompt_tokens ?? 0, output_tokens: usage.completion_tokens ?? 0 },
  };
}

/** One Anthropic stream event: its name on the `event:` line, the value as the data. */
const anthropicEvent = (value: Json): Buffer =>
  Buffer.from(`event: ${String(value.type)}\ndata: ${JSON.stringify(value)}\n\n`, "utf8");

/**
 * Anthropic's error body for a status and message; our error code, when there is one, goes
 * inside `error` beside Anthropic's own `type`, and in `error.details.error_code`
 * (docs/http.md, "Anthropic Messages").
 */
export function anthropicErrorBody(status: number, message: string, code?: string): Json {
  const error: Json = { type: errorType(status), message };
  if (code !== undefined) {
    error.code = code;
    // Also where the official SDK reads a code into APIError.errorCode (@anthropic-ai/sdk 1.16.0, core/error.js).
    error.details = { error_code: code };
  }
  return { type: "error", error };
}

function errorType(status: number): string {
  const types: Record<number, string> = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
    504: "timeout_error",
  };
  return types[status] ?? (status >= 400 && status < 500 ? "invalid_request_error" : "api_error");
}

type Block = "thinking" | "text" | "tool_use";

/**
 * A reply's `chat.completion.chunk` events as Anthropic's: message_start, then per block
 * content_block_start / _delta / _stop (a thinking block, a text block, a tool_use block
 * per call, each opened when its first delta comes), and at the end message_delta (stop
 * reason, usage) and message_stop. `end()` is for a committed turn only: the caller sends
 * it where chat sends `data: [DONE]`.
 */
export class AnthropicEvents {
  readonly #request: ConvertedRequest;
  #index = -1;
  #open: Block | undefined;
  #finish: unknown = null;
  #matched: unknown = null;
  #usage: Json = {};
  #started = false;

  constructor(request: ConvertedRequest) {
    this.#request = request;
  }

  /** `message_start` now, before any chunk (a turn still at the engine): later chunks add none. */
  start(): Buffer {
    return this.#start(undefined);
  }

  /** The events for one parsed chunk (message_start before the first). */
  chunk(chunk: unknown): Buffer[] {
    const out: Buffer[] = [];
    if (!this.#started) out.push(this.#start(chunk));
    if (!isObject(chunk)) return out;
    if (isObject(chunk.usage)) this.#usage = chunk.usage;
    const choice = Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : undefined;
    if (choice === undefined) return out;
    const delta = isObject(choice.delta) ? choice.delta : {};
    if (typeof delta.reasoning_content === "string" && delta.reasoning_content !== "")
      out.push(...this.#delta("thinking", { type: "thinking_delta", thinking: delta.reasoning_content }));
    if (typeof delta.content === "string" && delta.content !== "")
      out.push(...this.#delta("text", { type: "text_delta", text: delta.content }));
    for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) out.push(...this.#toolCall(call));
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.#finish = choice.finish_reason;
      this.#matched = matchedOf(choice) ?? null;
    }
    return out;
  }

  /** The events after the last chunk of a committed turn. */
  end(): Buffer[] {
    const out: Buffer[] = [];
    if (!this.#started) out.push(this.#start(undefined));
    out.push(...this.#close());
    const usage = { input_tokens: this.#usage.prompt_tokens ?? 0, output_tokens: this.#usage.completion_tokens ?? 0 };
    const delta = stopReason(this.#finish, this.#matched, this.#request);
    out.push(anthropicEvent({ type: "message_delta", delta, usage }));
    out.push(anthropicEvent({ type: "message_stop" }));
    return out;
  }

  #start(chunk: unknown): Buffer {
    this.#started = true;
    const model = this.#request.model || (isObject(chunk) && typeof chunk.model === "string" ? chunk.model : "");
    const message = {
      id: messageId(isObject(chunk) ? chunk.id : undefined),
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      // The prompt's size comes with the last chunk: message_delta carries both counts.
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    return anthropicEvent({ type: "message_start", message });
  }

  #close(): Buffer[] {
    if (this.#open === undefined) return [];
    this.#open = undefined;
    return [anthropicEvent({ type: "content_block_stop", index: this.#index })];
  }

  #begin(kind: Block, block: Json): Buffer[] {
    const out = this.#close();
    this.#index++;
    this.#open = kind;
    out.push(anthropicEvent({ type: "content_block_start", index: this.#index, content_block: block }));
    return out;
  }

  #delta(kind: "thinking" | "text", delta: Json): Buffer[] {
    const empty = kind === "text" ? { type: "text", text: "" } : { type: "thinking", thinking: "", signature: "" };
    const out = this.#open === kind ? [] : this.#begin(kind, empty);
    out.push(anthropicEvent({ type: "content_block_delta", index: this.#index, delta }));
    return out;
  }

  /** A call's head (it has an id) opens a tool_use block; its arguments are the block's JSON deltas. */
  #toolCall(call: unknown): Buffer[] {
    if (!isObject(call)) return [];
    const fn = isObject(call.function) ? call.function : {};
    const out =
      typeof call.id === "string"
        ? this.#begin("tool_use", { type: "tool_use", id: call.id, name: fn.name, input: {} })
        : [];
    if (typeof fn.arguments === "string" && fn.arguments !== "" && this.#open === "tool_use")
      out.push(
        anthropicEvent({
          type: "content_block_delta",
          index: this.#index,
          delta: { type: "input_json_delta", partial_json: fn.arguments },
        }),
      );
    return out;
  }
}
