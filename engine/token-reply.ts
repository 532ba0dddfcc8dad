// The OpenAI `chat.completion` the server builds for the token-level engine APIs, which
// answer with text and ids, not a chat message. The session's model family parses the
// completion text into content, reasoning and tool calls; the finish reason says why the
// model stopped in OpenAI's words.
import { randomBytes } from "node:crypto";
import type { ChatMessage } from "../sessions/chat-template.ts";
import type { EngineTurnRequest } from "../sessions/engine-port.ts";
import type { ParseContext, ParsedCompletion, TitoFamily } from "../sessions/families/index.ts";
import type { AdapterOptions, TurnOutcome } from "./adapter.ts";

export interface TokenCompletion {
  /** The completion as the engine decoded it (special tokens kept). */
  text: string;
  completionIds: number[];
  /** Why the engine stopped: "length" when it hit the token limit, anything else is a stop. */
  finish: "stop" | "length";
  /** The request's stop string that ended the completion, when the engine names one. */
  matchedStop?: string;
  promptTokens: number;
  /** The request's `model`, echoed. */
  model: string;
}

export interface BuiltReply {
  message: ChatMessage;
  clientBody: Buffer[];
  /** Tool-call blocks that did not parse (left in the content). */
  malformedToolCalls: number;
}

const completionId = () => `chatcmpl-${randomBytes(12).toString("hex")}`;

/** The assistant message of a parsed completion. */
export function messageOf(parsed: ParsedCompletion): ChatMessage {
  const message: ChatMessage = { role: "assistant", content: parsed.content };
  if (parsed.reasoning_content !== undefined) message.reasoning_content = parsed.reasoning_content;
  if (parsed.tool_calls !== undefined && parsed.tool_calls.length > 0) message.tool_calls = parsed.tool_calls;
  return message;
}

/** OpenAI's finish reason: a completion cut at the token limit is "length" even when it holds a whole tool call. */
export const finishReasonOf = (finish: "stop" | "length", message: ChatMessage) =>
  finish === "length" ? "length" : message.tool_calls !== undefined ? "tool_calls" : "stop";

/** SGLang's chat choices name the stop string that ended them (`matched_stop`); so do ours, when one did. */
export const matchedStopOf = (c: { matchedStop?: string }) =>
  c.matchedStop === undefined ? {} : { matched_stop: c.matchedStop };

export function buildChatReply(family: TitoFamily, completion: TokenCompletion, context?: ParseContext): BuiltReply {
  const parsed = family.parseCompletion(completion.text, context);
  const message = messageOf(parsed);
  const finishReason = finishReasonOf(completion.finish, message);
  const completionTokens = completion.completionIds.length;
  const reply = {
    id: completionId(),
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: completion.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason, ...matchedStopOf(completion) }],
    usage: {
      prompt_tokens: completion.promptTokens,
      completion_tokens: completionTokens,
      total_tokens: completion.promptTokens + completionTokens,
    },
  };
  return { message, clientBody: [Buffer.from(JSON.stringify(reply))], malformedToolCalls: parsed.malformedToolCalls };
}

/** A token-level turn's outcome: the reply built from what the engine generated, malformed tool calls counted. */
export function tokenOutcome(
  options: AdapterOptions,
  turn: EngineTurnRequest,
  generated: Pick<TokenCompletion, "text" | "completionIds" | "finish" | "matchedStop">,
): TurnOutcome {
  const model = typeof turn.body.model === "string" ? turn.body.model : "";
  const tools = Array.isArray(turn.body.tools) ? turn.body.tools : undefined;
  const built = buildChatReply(
    turn.family,
    { ...generated, promptTokens: turn.promptIds.length, model },
    { tools, kwargs: turn.templateKwargs },
  );
  options.onMalformedToolCalls?.(built.malformedToolCalls);
  return {
    requestHasConversation: false, // the request sent upstream holds only ids
    completionIds: generated.completionIds,
    message: built.message,
    clientBody: built.clientBody,
    headers: { "content-type": "application/json" },
  };
}
