// What a vLLM engine serves, read from its `GET /v1/models` (OpenAIServingModels.
// show_available_models, vllm/entrypoints/openai/models/serving.py @
// 4fe4500477d5bbf2c2a467adacc60f7d215cd655): a `ModelList` whose `data` holds one
// `ModelCard` per served name (`id`, and `max_model_len` for a base model; LoRA cards carry
// none: vllm/entrypoints/openai/engine/protocol.py @ d7e52523a55cfd60207c99d9f3b7ed527d2115b7).
// vLLM answers 404 "The model `m` does not exist." for any other `model` (OpenAIServing.
// _check_model, vllm/entrypoints/openai/engine/serving.py @ 619e4b31da7791a6ea4f6724fe45b54556b5a8fa),
// so every request carries the served name, never the client's. Read once, at the first
// turn, and again after a failed read or a 404 (an engine restarted with another model).
// `--engine-model` names the model instead of the list's first; its context length is still
// read from the list. The length is also the Engine port's `contextLength` (for budgets,
// context-length.ts), on SGLang's APIs too.
import type { EngineTurnRequest } from "../sessions/engine-port.ts";
import { EngineReplyError, EngineRequestError } from "../sessions/errors.ts";
import type { CancelSignal } from "../buffers/cancel.ts";
import { forwardHeaders } from "./upstream.ts";
import type { AdapterOptions } from "./adapter.ts";

/** What the engine says of the model it serves. */
export interface EngineModelInfo {
  /** The served model name every upstream request carries. */
  model: string;
  /** The context length (prompt + completion tokens), when the engine states it. */
  maxModelLen?: number;
}

interface ModelCard {
  id?: unknown;
  max_model_len?: unknown;
  parent?: unknown;
}

const MODELS_PATH = "/v1/models";

/** The served model and its context length from a /v1/models reply body. */
export function readModelList(text: string, engineModel: string | undefined): EngineModelInfo {
  let list: { data?: unknown };
  try {
    list = JSON.parse(text) as { data?: unknown };
  } catch (err) {
    throw EngineReplyError.notJson(`GET /v1/models: ${(err as Error).message}`, { cause: err });
  }
  const cards = (Array.isArray(list?.data) ? list.data : []).filter(
    (c): c is ModelCard => c !== null && typeof c === "object" && typeof (c as ModelCard).id === "string",
  );
  const named = engineModel === undefined ? cards[0] : cards.find((c) => c.id === engineModel);
  const model = engineModel ?? (named?.id as string | undefined);
  if (model === undefined) throw new EngineReplyError("the engine's GET /v1/models lists no model");
  // A LoRA card has no max_model_len: its base model's (the card's parent, else the first) is the limit.
  const base = cards.find((c) => c.id === named?.parent) ?? cards[0];
  const len = [named?.max_model_len, base?.max_model_len].find((n) => Number.isInteger(n) && (n as number) > 0);
  return { model, maxModelLen: len as number | undefined };
}

export function servedModel(options: AdapterOptions) {
  let pending: Promise<EngineModelInfo> | undefined;
  const read = async (headers: EngineTurnRequest["headers"], signal?: CancelSignal): Promise<EngineModelInfo> => {
    const res = await options.upstream.send({
      method: "GET",
      path: MODELS_PATH,
      headers: { ...forwardHeaders(pick(headers), options.dropAuthorization), accept: "application/json" },
      signal,
    });
    try {
      const text = Buffer.concat(res.body).toString("utf8");
      if (res.status !== 200)
        throw new EngineRequestError(`the engine answered GET /v1/models with ${res.status}: ${text.slice(0, 200)}`);
      return readModelList(text, options.engineModel);
    } finally {
      res.release?.();
    }
  };
  return {
    info(headers: EngineTurnRequest["headers"], signal?: CancelSignal): Promise<EngineModelInfo> {
      if (pending === undefined) {
        const reading = read(headers, signal);
        pending = reading;
        reading.catch(() => {
          if (pending === reading) pending = undefined; // read again next time
        });
      }
      return pending;
    },
    forget(): void {
      pending = undefined;
    },
  };
}

/** Only the client's credentials go to GET /v1/models (a vLLM started with --api-key wants them). */
const pick = (headers: EngineTurnRequest["headers"]) =>
  headers.authorization === undefined ? {} : { authorization: headers.authorization };
