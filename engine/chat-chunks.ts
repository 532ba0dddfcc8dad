// The `chat.completion.chunk` events of a streamed turn, as OpenAI's API writes them and the
// `openai` client reads them: a first delta with the role, then `reasoning_content` and
// `content` deltas as they come (reasoning under the name SGLang and vLLM use), each tool
// call as a delta with its index, id, type and name, then one with its arguments, a last
// chunk with an empty delta and the finish reason, and, when the request's
// `stream_options.include_usage` is set, a chunk with no choices and the usage. Every event
// is one Buffer, written to the client as one piece. `data: [DONE]` is the session core's
// to send, once the turn is committed.
import { randomBytes } from "node:crypto";
import type { CompletionDelta } from "../sessions/completion-stream.ts";
import { sseData } from "../sessions/sse.ts";
import { matchedStopOf } from "./token-reply.ts";

export interface ChunkIdentity {
  id: string;
  created: number;
  model: string;
}

export const chunkId = () => `chatcmpl-${randomBytes(12).toString("hex")}`;

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Whether the request asked for the usage chunk (`stream_options.include_usage: true`). */
export function includeUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options;
  return (
    options !== null && typeof options === "object" && (options as { include_usage?: unknown }).include_usage === true
  );
}

export class ChatChunks {
  readonly #identity: ChunkIdentity;

  constructor(identity: ChunkIdentity) {
    this.#identity = identity;
  }

  #chunk(delta: Record<string, unknown>, finishReason: string | null = null, matchedStop?: string): Buffer {
    const { id, created, model } = this.#identity;
    const choice = { index: 0, delta, logprobs: null, finish_reason: finishReason, ...matchedStopOf({ matchedStop }) };
    return sseData({ id, object: "chat.completion.chunk", created, model, choices: [choice] });
  }

  role(): Buffer {
    return this.#chunk({ role: "assistant", content: "" });
  }

  /** The events of one delta: reasoning, content, then each new tool call (its head, then its arguments). */
  delta(d: CompletionDelta): Buffer[] {
    const out: Buffer[] = [];
    if (d.reasoning !== "") out.push(this.#chunk({ reasoning_content: d.reasoning }));
    if (d.content !== "") out.push(this.#chunk({ content: d.content }));
    for (const call of d.toolCalls) {
      const head = {
        index: call.index,
        id: call.id,
        type: "function",
        function: { name: call.function.name, arguments: "" },
      };
      out.push(this.#chunk({ tool_calls: [head] }));
      out.push(this.#chunk({ tool_calls: [{ index: call.index, function: { arguments: call.function.arguments } }] }));
    }
    return out;
  }

  /** The last chunk: the finish reason, and the stop string that ended the completion when the engine named one. */
  finish(reason: string, matchedStop?: string): Buffer {
    return this.#chunk({}, reason, matchedStop);
  }

  usage(usage: Usage): Buffer {
    const { id, created, model } = this.#identity;
    return sseData({ id, object: "chat.completion.chunk", created, model, choices: [], usage });
  }
}
