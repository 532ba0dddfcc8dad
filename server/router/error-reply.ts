// How the router answers with an error: one place, so every error body of the HTTP
// contract is the same shape (docs/http.md): `{"error": message, "code": "TITO_ERR_…"}`,
// with the status and headers (Retry-After) the error's class gives. On the Anthropic
// Messages route it is Anthropic's shape, the code inside `error`, as the worker writes it
// there (sessions/anthropic-convert.ts). Routes and hooks throw coded errors; the app's
// error handler (errorHandler) writes them, and maps what Fastify itself raises (a body
// too large, a malformed request, a route that is not there) to coded errors first.
import { randomBytes } from "node:crypto";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { CodedError } from "../../buffers/coded-error.ts";
import {
  BadRequestError,
  BodyTooLargeError,
  RouteNotFoundError,
  RouterInternalError,
  SessionIdTooLongError,
  UriTooLongError,
} from "./errors.ts";

export const JSON_TYPE = "application/json; charset=utf-8";

/** The route whose errors are in Anthropic's shape (router-sessions.ts). */
export const MESSAGES_ROUTE = "/sessions/:id/v1/messages";

/** Anthropic's error `type` for a status: the table of sessions/anthropic-convert.ts, which the router may not import. */
const ANTHROPIC_TYPES: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
  504: "timeout_error",
  529: "overloaded_error",
};
const anthropicType = (status: number) =>
  ANTHROPIC_TYPES[status] ?? (status >= 400 && status < 500 ? "invalid_request_error" : "api_error");

/** The JSON body of `err`: ours, or Anthropic's with our code inside. */
export function errorBody(err: CodedError, anthropic = false): string {
  if (!anthropic) return JSON.stringify({ error: err.message, code: err.code });
  const status = err.status === 503 ? 529 : err.status;
  return JSON.stringify({
    type: "error",
    // `details.error_code` as well: where the official SDK reads a code into APIError.errorCode
    // (@anthropic-ai/sdk 1.16.0, core/error.js).
    error: { type: anthropicType(status), message: err.message, code: err.code, details: { error_code: err.code } },
    // Anthropic's error bodies carry the request's id, as the worker's do (sessions/messages-turn.ts).
    request_id: `req_${randomBytes(12).toString("hex")}`,
  });
}

/**
 * Writes `err` as the reply: its status, its headers, its body in the route's shape. On the
 * Messages route a 503 is Anthropic's 529 (overloaded), as the worker answers there
 * (sessions/messages-turn.ts): the official SDKs retry it as they do a 503.
 */
export function sendError(reply: FastifyReply, err: CodedError): FastifyReply {
  const anthropic = reply.request.routeOptions?.url === MESSAGES_ROUTE;
  return reply
    .code(anthropic && err.status === 503 ? 529 : err.status)
    .headers({ ...err.headers })
    .header("content-type", JSON_TYPE)
    .send(errorBody(err, anthropic));
}

/** What Fastify raised, or a route threw, as a coded error; anything uncoded is a bug (500). */
export function codedError(err: unknown, request: FastifyRequest, bodyLimit: number): CodedError {
  if (err instanceof CodedError) return err;
  const e = err as Partial<FastifyError>;
  if (e.code === "FST_ERR_CTP_BODY_TOO_LARGE") return new BodyTooLargeError(bodyLimit);
  // An id too long for the path parameter is still an invalid session id.
  if (e.code === "FST_ERR_MAX_PARAM_LENGTH")
    return request.method === "PUT" ? new SessionIdTooLongError() : new UriTooLongError(String(e.message));
  const status = typeof e.statusCode === "number" ? e.statusCode : 500;
  if (status >= 400 && status < 500) return new BadRequestError(status, String(e.message), { cause: err });
  return new RouterInternalError(err instanceof Error ? err.message : String(err), { cause: err });
}

/**
 * The app's one error handler: for `setErrorHandler`, for `frameworkErrors` (errors raised
 * before routing) and, given a RouteNotFoundError, for the not-found handler.
 */
export function errorHandler(bodyLimit: number) {
  return (err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const coded = codedError(err, request, bodyLimit);
    if (coded.status >= 500 && !(err instanceof CodedError)) request.log.error({ err }, "router error");
    return sendError(reply, coded);
  };
}

export const notFound = (request: FastifyRequest) => new RouteNotFoundError(request.method, request.url);
