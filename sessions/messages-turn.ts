// `POST /sessions/{id}/v1/messages`: an Anthropic Messages turn on the session core. The
// request is converted to the chat form (anthropic-convert.ts) and taken as a chat turn
// of the "messages" client API — the same prompt building, engine call, commit, records,
// journal and samples — and its reply converted back: a `message`, or for `stream: true`
// Anthropic's events, where `message_stop` takes the place of `data: [DONE]` (sent only
// once the turn is committed) and an error event the place of chat's. Every error is in
// Anthropic's shape (`{"type":"error","error":{"type","message"}}`).
import { randomBytes } from "node:crypto";
import { anthropicErrorBody, AnthropicEvents, chatToMessage, messagesToChat } from "./anthropic-convert.ts";
import { parseJsonLossless, stringifyLossless } from "./lossless-json.ts";
import type { ConvertedRequest } from "./anthropic-convert.ts";
import { InvalidJsonError, TitoError } from "./errors.ts";
import {
  errorResponse,
  type CoreRequest,
  type CoreResponse,
  type SessionCore,
  type TurnContext,
} from "./session-core.ts";
import { SSE_HEADERS } from "./sse.ts";
import type { CancelSignal } from "../buffers/cancel.ts";

const JSON_HEADERS = { "content-type": "application/json" };

/** The chat-side path the converted turn takes. */
const CHAT_PATH = "/v1/chat/completions";

export async function messagesTurn(
  core: SessionCore,
  sessionId: string,
  req: CoreRequest,
  signal?: CancelSignal,
  context: TurnContext = {},
): Promise<CoreResponse> {
  let converted: ConvertedRequest;
  try {
    converted = messagesToChat(parseJson(req.body));
  } catch (err) {
    if (err instanceof TitoError) return asAnthropicError(errorResponse(err));
    throw err;
  }
  // Written back as it was read (lossless-json.ts): tool schemas and inputs keep their numbers and key order.
  const chatRequest = { ...req, path: CHAT_PATH, body: Buffer.from(stringifyLossless(converted.chat)) };
  const res = await core.chat(sessionId, chatRequest, signal, { ...context, api: "messages" });
  if (res.status !== 200) return asAnthropicError(res);
  if (isStream(res.body)) return { status: 200, headers: { ...SSE_HEADERS }, body: events(res.body, converted) };
  const reply = JSON.parse(concat(res.body).toString("utf8")) as unknown;
  return json(200, chatToMessage(reply, converted));
}

function parseJson(bytes: Buffer): unknown {
  try {
    return parseJsonLossless(bytes.toString("utf8"));
  } catch (err) {
    throw new InvalidJsonError((err as Error).message, { cause: err });
  }
}

const json = (status: number, value: unknown): CoreResponse => ({
  status,
  headers: { ...JSON_HEADERS },
  body: Buffer.from(JSON.stringify(value)),
});

const isStream = (body: CoreResponse["body"]): body is AsyncIterable<Buffer> =>
  !Buffer.isBuffer(body) && !Array.isArray(body);
const concat = (body: Buffer | Buffer[]) => (Buffer.isBuffer(body) ? body : Buffer.concat(body));

/**
 * A failed turn's response in Anthropic's shape, status and retry headers kept: the message
 * is the core's `error` (or an engine's own error message), else the body's text. A body
 * already in that shape is left as it is.
 */
export function asAnthropicError(res: CoreResponse): CoreResponse {
  if (res.status < 400 || isStream(res.body)) return res;
  const text = concat(res.body).toString("utf8");
  let message = text;
  let code: string | undefined;
  try {
    const body = JSON.parse(text) as { type?: unknown; error?: unknown; message?: unknown; code?: unknown };
    if (body.type === "error") return res;
    if (typeof body.code === "string") code = body.code;
    const inner = body.error as { message?: unknown } | undefined;
    if (typeof body.error === "string") message = body.error;
    else if (typeof inner?.message === "string") message = inner.message;
    else if (typeof body.message === "string") message = body.message;
  } catch {
    // Not JSON: the text is the message.
  }
  // Anthropic's overloaded_error is HTTP 529 (the official SDKs retry it, as they do 503).
  const status = res.status === 503 ? 529 : res.status;
  const out = json(status, withRequestId(anthropicErrorBody(status, message, code)));
  if (res.headers["retry-after"] !== undefined) out.headers["retry-after"] = res.headers["retry-after"];
  return out;
}

/** The chat events of a streamed turn as Anthropic's; stopping early stops the chat stream too. */
async function* events(chat: AsyncIterable<Buffer>, request: ConvertedRequest): AsyncGenerator<Buffer> {
  const out = new AnthropicEvents(request);
  let pending = "";
  for await (const piece of chat) {
    pending += piece.toString("utf8");
    let cut: number;
    while ((cut = pending.indexOf("\n\n")) >= 0) {
      const event = pending.slice(0, cut);
      pending = pending.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice("data: ".length);
        if (data === "[DONE]") {
          yield* out.end();
          continue;
        }
        const value = JSON.parse(data) as { error?: { message?: unknown; type?: unknown; code?: unknown } };
        if (value.error !== undefined) {
          yield errorEvent(value.error);
          continue;
        }
        for (const b of out.chunk(value)) yield b;
      }
    }
  }
}

/** Anthropic's error bodies carry the request's id (`request_id`) beside the error. */
const withRequestId = (body: object) => ({ ...body, request_id: `req_${randomBytes(12).toString("hex")}` });

/** Chat's mid-stream error event (`{"error":{message,type,code}}`: type our code, code the status) as Anthropic's. */
function errorEvent(error: { message?: unknown; type?: unknown; code?: unknown }): Buffer {
  const given = typeof error.code === "number" ? error.code : 500;
  const status = given === 503 ? 529 : given;
  const message = typeof error.message === "string" ? error.message : "stream failed";
  const code = typeof error.type === "string" && error.type.startsWith("TITO_ERR_") ? error.type : undefined;
  const body = withRequestId(anthropicErrorBody(status, message, code));
  return Buffer.from(`event: error\ndata: ${JSON.stringify(body)}\n\n`, "utf8");
}
