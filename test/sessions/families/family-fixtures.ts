// Fixtures the family tests share: tool declarations in the OpenAI shape, tool calls, and
// the conversation every family's loop starts from.
import type { ChatMessage } from "../../../sessions/chat-template.ts";

/** A declared tool: `properties` as JSON-schema properties (absent: an object schema with none). */
export function tool(name: string, properties?: Record<string, unknown>, description?: string) {
  return {
    type: "function",
    function: {
      name,
      ...(description === undefined ? {} : { description }),
      parameters: properties === undefined ? { type: "object" } : { type: "object", properties },
    },
  };
}

/** JSON-schema properties of the given types: `types({ city: "string" })`. */
export const types = (props: Record<string, string>) =>
  Object.fromEntries(Object.entries(props).map(([k, type]) => [k, { type }]));

/** A tool call as a client sends it back (an `id` only when given). */
export function call(name: string, args: Record<string, unknown>, id?: string) {
  return { ...(id === undefined ? {} : { id }), type: "function" as const, function: { name, arguments: args } };
}

/** A tool result answering the k-th call of the last assistant message (see LoopRound). */
export const result = (k: number, content: string): ChatMessage => ({ role: "tool", tool_call_id: `$${k}`, content });

export const WEATHER_BOT = "You are a weather bot.";

/** The first request of most loops: a system prompt and a question that wants two calls. */
export const twoQuestionHistory = (question = "Weather in Paris, and search Rome?"): ChatMessage[] => [
  { role: "system", content: WEATHER_BOT },
  { role: "user", content: question },
];

/** A DeepSeek call as the encoders take it (arguments as a JSON string). */
const deepseekCall = (id: string, city: string) => ({
  id,
  type: "function",
  function: { name: "get_weather", arguments: JSON.stringify({ city }) },
});

/** What the DeepSeek encoder tests start from: a first request, and an answer with two calls. */
export const DEEPSEEK = {
  call: deepseekCall,
  twoCalls: {
    role: "assistant",
    content: "Checking both.",
    reasoning_content: "two cities",
    tool_calls: [deepseekCall("c1", "Paris"), deepseekCall("c2", "Rome")],
  } as ChatMessage,
  m0: [
    { role: "system", content: "You check the weather." },
    { role: "user", content: "Paris and Rome?" },
  ] as ChatMessage[],
};
