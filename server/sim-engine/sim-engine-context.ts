// The simulated SGLang's context-length check, as SGLang makes it before generating
// (TokenizerManager._validate_one_request, python/sglang/srt/managers/tokenizer_manager.py
// @ 001067fffe33427bee0ed2f007fb7551a1d76b44): a prompt of context_len tokens or more, or a
// prompt plus max_new_tokens above context_len, is a ValueError with these messages. How
// each route answers it: `/generate` a 400 `{"error": {"message"}}`, or for `stream: true`
// a 200 event stream of that one error event then `[DONE]` (generate_request,
// python/sglang/srt/entrypoints/http_server.py @ 0025436eab0556737d615b36a4dd3e1e26e82f3d);
// the chat route a 400 in OpenAI's envelope `{"error": {"message", "type":
// "BadRequestError", "param": null, "code": 400}}` (OpenAIServingBase.create_error_response,
// python/sglang/srt/entrypoints/openai/serving_base.py). The vLLM route's own check is
// sim-engine-completions.ts checkCompletions.
import type { FastifyReply } from "fastify";
import { sendStream } from "./sim-engine-http.ts";

/** SGLang's refusal of a prompt over the context length; undefined when it fits. */
export function sglangOverflow(promptTokens: number, maxNewTokens: number | null | undefined, contextLen: number) {
  if (promptTokens >= contextLen)
    return `The input (${promptTokens} tokens) is longer than the model's context length (${contextLen} tokens).`;
  if (maxNewTokens !== null && maxNewTokens !== undefined && maxNewTokens + promptTokens > contextLen)
    return (
      `Requested token count exceeds the model's maximum context length of ${contextLen} tokens. ` +
      `You requested a total of ${maxNewTokens + promptTokens} tokens: ${promptTokens} tokens from the input messages and ` +
      `${maxNewTokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`
    );
  return undefined;
}

/** `/generate`'s answer to a request over the context length; undefined when it fits. */
export function refuseGenerateOverflow(
  reply: FastifyReply,
  body: { input_ids?: unknown; sampling_params?: Record<string, unknown> | null; stream?: unknown },
  contextLen: number,
): FastifyReply | undefined {
  const inputs = Array.isArray(body.input_ids) ? body.input_ids.length : 0;
  const maxNew = body.sampling_params?.max_new_tokens as number | null | undefined;
  const message = sglangOverflow(inputs, maxNew, contextLen);
  if (message === undefined) return undefined;
  const error = { error: { message } };
  if (body.stream !== true) return reply.code(400).send(error);
  async function* events() {
    yield Buffer.from(`data: ${JSON.stringify(error)}\n\n`);
    yield Buffer.from("data: [DONE]\n\n");
  }
  return sendStream(reply, events());
}

/** The chat route's answer to a refused request. */
export const refuseChat = (reply: FastifyReply, message: string): FastifyReply =>
  reply.code(400).send({ error: { message, type: "BadRequestError", param: null, code: 400 } });

/**
 * GET /v1/models: vLLM's ModelList of ModelCards (vllm/entrypoints/openai/engine/protocol.py
 * @ d7e52523a55cfd60207c99d9f3b7ed527d2115b7), which SGLang answers too; `maxModelLen`
 * undefined: a list that states none.
 */
export const modelList = (model: string, maxModelLen: number | undefined) => ({
  object: "list",
  data: [
    {
      id: model,
      object: "model",
      created: 0,
      owned_by: "vllm",
      root: model,
      parent: null,
      max_model_len: maxModelLen,
      permission: [],
    },
  ],
});
