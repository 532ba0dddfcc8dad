// What a chat turn's request must be before it is planned: a JSON object with a non-empty
// `messages` list of role-carrying messages whose content is text (a string or text parts),
// and an optional `tools` list; and which client
// API a session speaks. A session's turns all come through one API, chat completions or
// Anthropic messages (messages-turn.ts turns the latter into the former): the first commit
// decides, and a turn through the other API is a 400, never a trajectory of mixed shapes.
import { checkContent } from "./chat-template.ts";
import { ClientApiMixError, InvalidChatRequestError, InvalidJsonError } from "./errors.ts";
import { parseChatJson } from "./chat-body-json.ts";

export type ClientApi = "chat" | "messages";

/**
 * The roles a chat message may have: the ones the chat-completions API defines (OpenAI's
 * API refuses any other). A role outside them is a 400, never rendered: a template would
 * otherwise drop it, or render it as it pleases, and the engine see what no client meant.
 */
export const CHAT_ROLES: readonly string[] = ["system", "developer", "user", "assistant", "tool"];

export function parseChatBody(bytes: Buffer): Record<string, unknown> {
  let body: unknown;
  try {
    // Numbers and key order as Python reads them, for the template (lossless-json.ts), the
    // messages one by one (chat-body-json.ts).
    body = parseChatJson(bytes);
  } catch (err) {
    throw new InvalidJsonError((err as Error).message, { cause: err });
  }
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new InvalidChatRequestError("chat request body must be a JSON object");
  const b = body as Record<string, unknown>;
  if (!Array.isArray(b.messages) || b.messages.length === 0)
    throw new InvalidChatRequestError("chat request needs a non-empty `messages` list");
  b.messages.forEach((m: unknown, i: number) => {
    if (!m || typeof m !== "object" || typeof (m as { role?: unknown }).role !== "string") {
      throw new InvalidChatRequestError(`messages[${i}] must be an object with a string \`role\``);
    }
    const role = (m as { role: string }).role;
    if (!CHAT_ROLES.includes(role))
      throw new InvalidChatRequestError(
        `messages[${i}].role must be one of ${CHAT_ROLES.join(", ")}, got ${JSON.stringify(role)}`,
      );
    // Every family's renderer (jinja or code) then sees text only.
    checkContent((m as { content?: unknown }).content, `messages[${i}]`);
  });
  if (b.tools !== undefined && b.tools !== null && !Array.isArray(b.tools))
    throw new InvalidChatRequestError("`tools` must be a list");
  return b;
}

/** Refuses a turn through another API than the one the session's committed turns came through. */
export function checkClientApi(session: { id: string; clientApi?: ClientApi }, api: ClientApi): void {
  if (session.clientApi !== undefined && session.clientApi !== api)
    throw new ClientApiMixError(session.id, session.clientApi, api);
}
