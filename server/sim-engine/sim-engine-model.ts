// The simulated engine's "model" for one tokenizer folder: the TITO family whose format it
// writes replies in (chosen, or detected from the folder), the id it stops with, and the
// renderer a messages-only chat request is rendered with. Owns reading a chat request's
// prompt facts (turn count, tool-result flag) and writing the chat route's reply in the
// family's format: the reply plan (sim-engine-reply.ts) becomes an AssistantTurn, the
// completion is `family.formatCompletion(turn)` + the stop token, and the message is what
// `family.parseCompletion` makes of that text, as SGLang's parsers would.
// It never touches HTTP and keeps no state between requests.
import { jinjaRenderer, type ChatMessage, type ChatRenderer } from "../../sessions/chat-template.ts";
import {
  detectFamily,
  selectFamily,
  type AssistantTurn,
  type ParsedCompletion,
  type TitoFamily,
} from "../../sessions/families/index.ts";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { BadRequest, eosIdOf } from "./sim-engine-completion.ts";
import { continues, splitPartial } from "./sim-engine-continue.ts";
import { factsFromText, hashIds, planReply, type PromptFacts, type SimReply } from "./sim-engine-reply.ts";

export interface SimModel {
  folder: TokenizerFolder;
  family: TitoFamily;
  /** The id generation ends with: the family's first stop token, else the tokenizer's eos. */
  stopId: number | undefined;
  renderer: ChatRenderer;
}

/**
 * The model for a folder. A family named explicitly must exist; a detected one that is not
 * built yet falls back to `default` (the simulator still answers, in plain text).
 */
export function simModel(folder: TokenizerFolder, titoFamily?: string): SimModel {
  let family: TitoFamily;
  try {
    family = selectFamily(folder, titoFamily);
  } catch (err) {
    if (titoFamily !== undefined || detectFamily(folder) === "default") throw err;
    family = selectFamily(folder, "default");
  }
  const stop = family.stopTokens[0];
  const stopId = (stop === undefined ? undefined : folder.tokenId(stop)) ?? eosIdOf(folder);
  // A real engine renders messages with the model's own template; a folder that ships none
  // (DeepSeek V3.2/V4) falls back to the family's renderer.
  const renderer =
    folder.chatTemplate !== "" ? jinjaRenderer(folder) : (family.renderer ?? jinjaRenderer(folder, family.template));
  return { folder, family, stopId, renderer };
}

/** The chat request fields the model reads. */
export interface ChatRequestView {
  messages?: ChatMessage[];
  input_ids?: number[];
  tools?: unknown[] | null;
  chat_template_kwargs?: Record<string, unknown> | null;
}

/** The family's pinned kwargs under the request's own. */
export function requestKwargs(model: SimModel, body: ChatRequestView): Record<string, unknown> {
  return { ...model.family.pinnedKwargs, ...(body.chat_template_kwargs ?? {}) };
}

const factsOfMessages = (messages: readonly ChatMessage[]) => ({
  turn: messages.filter((m) => m.role === "assistant").length,
  afterToolResult: messages[messages.length - 1]?.role === "tool",
});

/**
 * The facts of a chat request. From `input_ids`: a ChatML (Qwen) prompt is read from its
 * decoded text; any other family's facts come from the request's `messages` when it has
 * them (its prompt format is not parsed here). Without ids, the messages are rendered.
 */
export function chatFacts(model: SimModel, body: ChatRequestView): PromptFacts {
  const { folder } = model;
  const tools = Array.isArray(body.tools) ? body.tools : [];
  const messages = Array.isArray(body.messages) ? body.messages : undefined;
  if (Array.isArray(body.input_ids)) {
    const ids = body.input_ids;
    const chatml = folder.tokenId("<|im_start|>") !== undefined;
    if (!chatml && messages) return { ids, tools, ...factsOfMessages(messages) };
    return { ids, tools, ...factsFromText(folder.decode(ids)) };
  }
  if (!messages) throw new BadRequest("the request needs `messages` or `input_ids`");
  let text: string;
  try {
    text = model.renderer.render(messages, { tools, addGenerationPrompt: true, kwargs: requestKwargs(model, body) });
  } catch (err) {
    throw new BadRequest(`cannot render messages with the chat template: ${(err as Error).message}`);
  }
  return { ids: folder.encode(text), tools, ...factsOfMessages(messages) };
}

interface Written {
  text: string;
  parsed: ParsedCompletion;
}

function write(
  model: SimModel,
  turn: AssistantTurn,
  callId: string,
  tools: readonly unknown[],
  kwargs: Readonly<Record<string, unknown>>,
): Written {
  const text = model.family.formatCompletion(turn, kwargs);
  const parsed = model.family.parseCompletion(text, { tools, kwargs, newId: () => callId });
  return { text, parsed };
}

/** The chat route's reply in the family's format, truncated to `maxTokens` when given. */
export function buildReply(
  model: SimModel,
  facts: PromptFacts,
  kwargs: Readonly<Record<string, unknown>> = {},
  maxTokens?: number,
): SimReply {
  const { folder, stopId } = model;
  // A prompt that ends with the start of its own completion continues it (a resumed request).
  const { base, partial } = splitPartial(folder, facts.ids);
  if (partial.length > 0) {
    const whole = buildReply(model, { ...facts, ids: base, ...factsFromText(folder.decode(base)) }, kwargs);
    if (continues(whole.completionIds, partial)) {
      let rest = whole.completionIds.slice(partial.length);
      let finish = whole.finish;
      if (maxTokens !== undefined && rest.length > maxTokens) [rest, finish] = [rest.slice(0, maxTokens), "length"];
      const text = rest.at(-1) === stopId && finish !== "length" ? rest.slice(0, -1) : rest;
      const content = text.length === 0 ? "" : folder.decode(text);
      return { content, completionIds: rest, finish, offset: partial.length };
    }
  }
  const callId = `call_${hashIds(facts.ids).toString(16).padStart(8, "0")}${facts.turn}`;
  const plan = planReply(facts);
  let written: Written;
  if (plan.tool) {
    const call = {
      id: callId,
      type: "function" as const,
      function: { name: plan.tool.name, arguments: plan.tool.arguments },
    };
    written = write(model, { content: "", tool_calls: [call] }, callId, facts.tools, kwargs);
    // A family whose format carries no tool calls (gemma3, default) answers in words instead.
    if (!written.parsed.tool_calls?.length)
      written = write(model, { content: planReply({ ...facts, tools: [] }).text }, callId, facts.tools, kwargs);
  } else written = write(model, { content: plan.text }, callId, facts.tools, kwargs);
  const completionIds = folder.encode(written.text);
  if (stopId !== undefined) completionIds.push(stopId);
  if (maxTokens !== undefined && completionIds.length > maxTokens) {
    const cut = completionIds.slice(0, Math.max(0, maxTokens));
    return { content: folder.decode(cut), completionIds: cut, finish: "length" };
  }
  const { parsed } = written;
  const reply: SimReply = { content: parsed.content, completionIds, finish: "stop" };
  if (parsed.reasoning_content !== undefined) reply.reasoningContent = parsed.reasoning_content;
  if (parsed.tool_calls?.length) {
    reply.toolCalls = parsed.tool_calls;
    reply.finish = "tool_calls";
  }
  return reply;
}
