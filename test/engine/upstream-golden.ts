// The upstream oracle, as data: what each engine API accepts in a request and returns in a
// reply, written from the upstream definitions (facts, not code), each row naming the file
// and commit it was read at. upstream-fields.test.ts holds the adapters to it: every field
// an adapter sends is one upstream accepts, and a reply with only upstream's fields (the
// golden replies below) is enough for a turn. A row changes only after reading upstream again.

export interface UpstreamSource {
  repo: string;
  file: string;
  commit: string;
  /** The definition read (class, function). */
  what: string;
}

export interface FieldRow {
  source: UpstreamSource;
  fields: readonly string[];
}

const VLLM_COMPLETION = "vllm/entrypoints/openai/completion/protocol.py";
const VLLM_AT = "d5dba2d7b0ab9b98096560c69db7126b54b14d79";
const SGLANG_CHAT = "python/sglang/srt/entrypoints/openai/protocol.py";
const SGLANG_CHAT_AT = "004c82e07d876f6e4a0ad6e15325706b0f478f1a";

/** Request fields each route accepts (top-level; `sampling_params` of /generate separately). */
export const ACCEPTS: Record<string, FieldRow> = {
  "vllm-completions": {
    source: { repo: "vllm-project/vllm", file: VLLM_COMPLETION, commit: VLLM_AT, what: "CompletionRequest" },
    fields: [
      "model",
      "prompt",
      "echo",
      "frequency_penalty",
      "logit_bias",
      "logprobs",
      "max_tokens",
      "n",
      "presence_penalty",
      "seed",
      "stop",
      "stream",
      "stream_options",
      "suffix",
      "temperature",
      "top_p",
      "user",
      "use_beam_search",
      "top_k",
      "min_p",
      "repetition_penalty",
      "length_penalty",
      "stop_token_ids",
      "include_stop_str_in_output",
      "ignore_eos",
      "min_tokens",
      "skip_special_tokens",
      "spaces_between_special_tokens",
      "truncate_prompt_tokens",
      "allowed_token_ids",
      "prompt_logprobs",
      "prompt_embeds",
      "add_special_tokens",
      "response_format",
      "structured_outputs",
      "priority",
      "request_id",
      "logits_processors",
      "return_tokens_as_token_ids",
      "return_token_ids",
      "cache_salt",
      "kv_transfer_params",
      "vllm_xargs",
    ],
  },
  "vllm-completions structured_outputs": {
    // to_sampling_params maps response_format json_object to StructuredOutputsParams(json_object=True).
    source: {
      repo: "vllm-project/vllm",
      file: VLLM_COMPLETION,
      commit: VLLM_AT,
      what: "CompletionRequest.to_sampling_params",
    },
    fields: ["json", "json_object", "regex", "choice", "grammar", "structural_tag"],
  },
  "sglang-generate": {
    source: {
      repo: "sgl-project/sglang",
      file: "python/sglang/srt/managers/io_struct.py",
      commit: "001067fffe33427bee0ed2f007fb7551a1d76b44",
      what: "GenerateReqInput",
    },
    fields: [
      "rid",
      "session_id",
      "text",
      "input_ids",
      "input_embeds",
      "sampling_params",
      "return_logprob",
      "logprob_start_len",
      "top_logprobs_num",
      "token_ids_logprob",
      "return_text_in_logprobs",
      "stream",
      "return_hidden_states",
      "return_routed_experts",
      "routed_experts_start_len",
      "return_indexer_topk",
      "lora_path",
      "custom_logit_processor",
      "priority",
      "extra_key",
      "cache_salt",
    ],
  },
  "sglang-generate sampling_params": {
    source: {
      repo: "sgl-project/sglang",
      file: "python/sglang/srt/sampling/sampling_params.py",
      commit: "00c17cafcb9e289d5ca97c50e44ada54e4fd5b03",
      what: "SamplingParams (API parameters)",
    },
    fields: [
      "max_new_tokens",
      "stop",
      "stop_token_ids",
      "stop_regex",
      "temperature",
      "top_p",
      "top_k",
      "min_p",
      "frequency_penalty",
      "presence_penalty",
      "repetition_penalty",
      "min_new_tokens",
      "n",
      "json_schema",
      "regex",
      "ebnf",
      "structural_tag",
      "ignore_eos",
      "skip_special_tokens",
      "spaces_between_special_tokens",
      "no_stop_trim",
      "custom_params",
      "stream_interval",
      "logit_bias",
      "sampling_seed",
    ],
  },
  "sglang-chat": {
    // Stock SGLang takes `input_ids` here ("bypasses chat template tokenization entirely").
    // `return_indexer_topk` (--indexer-replay) is not among them at this commit: patched SGLang only.
    source: { repo: "sgl-project/sglang", file: SGLANG_CHAT, commit: SGLANG_CHAT_AT, what: "ChatCompletionRequest" },
    fields: [
      "messages",
      "model",
      "frequency_penalty",
      "logit_bias",
      "logprobs",
      "top_logprobs",
      "max_tokens",
      "max_completion_tokens",
      "n",
      "presence_penalty",
      "response_format",
      "seed",
      "stop",
      "stream",
      "stream_options",
      "temperature",
      "top_p",
      "user",
      "tools",
      "tool_choice",
      "parallel_tool_calls",
      "return_hidden_states",
      "return_routed_experts",
      "routed_experts_start_len",
      "return_cached_tokens_details",
      "return_prompt_token_ids",
      "return_token_ids",
      "return_meta_info",
      "reasoning_effort",
      "top_k",
      "min_p",
      "min_tokens",
      "regex",
      "ebnf",
      "repetition_penalty",
      "stop_token_ids",
      "stop_regex",
      "no_stop_trim",
      "ignore_eos",
      "continue_final_message",
      "skip_special_tokens",
      "lora_path",
      "session_id",
      "session_params",
      "separate_reasoning",
      "stream_reasoning",
      "chat_template_kwargs",
      "custom_logit_processor",
      "custom_params",
      "input_ids",
      "rid",
      "extra_key",
      "cache_salt",
      "priority",
    ],
  },
};

/** Reply fields each route returns. */
export const RETURNS: Record<string, FieldRow> = {
  "vllm-completions": {
    source: { repo: "vllm-project/vllm", file: VLLM_COMPLETION, commit: VLLM_AT, what: "CompletionResponse" },
    fields: [
      "id",
      "object",
      "created",
      "model",
      "choices",
      "service_tier",
      "system_fingerprint",
      "usage",
      "kv_transfer_params",
    ],
  },
  "vllm-completions choice": {
    source: { repo: "vllm-project/vllm", file: VLLM_COMPLETION, commit: VLLM_AT, what: "CompletionResponseChoice" },
    fields: [
      "index",
      "text",
      "logprobs",
      "finish_reason",
      "stop_reason",
      "token_ids",
      "prompt_logprobs",
      "prompt_token_ids",
    ],
  },
  "vllm-completions logprobs": {
    source: { repo: "vllm-project/vllm", file: VLLM_COMPLETION, commit: VLLM_AT, what: "CompletionLogProbs" },
    fields: ["text_offset", "token_logprobs", "tokens", "top_logprobs"],
  },
  "vllm /v1/models card": {
    source: {
      repo: "vllm-project/vllm",
      file: "vllm/entrypoints/openai/engine/protocol.py",
      commit: "d7e52523a55cfd60207c99d9f3b7ed527d2115b7",
      what: "ModelCard",
    },
    fields: ["id", "object", "created", "owned_by", "root", "parent", "max_model_len", "permission"],
  },
  "sglang-chat choice": {
    source: {
      repo: "sgl-project/sglang",
      file: SGLANG_CHAT,
      commit: SGLANG_CHAT_AT,
      what: "ChatCompletionResponseChoice",
    },
    fields: [
      "index",
      "message",
      "logprobs",
      "finish_reason",
      "matched_stop",
      "hidden_states",
      "prompt_token_ids",
      "token_ids",
      "meta_info",
    ],
  },
};

/** Finish reasons: what ends a generation, by engine. */
export const FINISH_REASONS: Record<string, FieldRow> = {
  sglang: {
    source: {
      repo: "sgl-project/sglang",
      file: "python/sglang/srt/managers/schedule_batch.py",
      commit: "000eaffacf048e51b64d4d72985ef8f0b7054b39",
      what: "FINISH_MATCHED_TOKEN/STR, FINISH_LENGTH, FINISH_ABORT .to_json types",
    },
    fields: ["stop", "length", "abort"],
  },
  "sglang-chat": {
    source: {
      repo: "sgl-project/sglang",
      file: SGLANG_CHAT,
      commit: SGLANG_CHAT_AT,
      what: "ChatCompletionResponseChoice.finish_reason",
    },
    fields: ["stop", "length", "tool_calls", "content_filter", "function_call", "abort"],
  },
  vllm: {
    source: {
      repo: "vllm-project/vllm",
      file: "vllm/v1/engine/__init__.py",
      commit: "0015f3f6a0e6ccca781c3f0b127101153c12ebbe",
      what: "RequestFinishedReason",
    },
    fields: ["stop", "length", "abort"],
  },
};

/** Golden replies written from the definitions above: only upstream's fields, upstream's shapes. */
export const GOLDEN_REPLIES = {
  /** vLLM >= 0.10.2 /v1/completions, stream: false, return_token_ids and logprobs 0 (CompletionResponse). */
  vllm: (ids: number[], text: string, finish: string) => ({
    id: "cmpl-golden",
    object: "text_completion",
    created: 0,
    model: "served",
    choices: [
      {
        index: 0,
        text,
        logprobs: {
          text_offset: ids.map((_, i) => i),
          token_logprobs: ids.map(() => -0.5),
          tokens: ids.map((id) => `token_id:${id}`),
          top_logprobs: ids.map((id) => ({ [`token_id:${id}`]: -0.5 })),
        },
        finish_reason: finish,
        stop_reason: null,
        token_ids: ids,
        prompt_logprobs: null,
        prompt_token_ids: null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: { prompt_tokens: 0, total_tokens: ids.length, completion_tokens: ids.length, prompt_tokens_details: null },
    kv_transfer_params: null,
  }),
  /** vLLM's GET /v1/models (ModelList of ModelCard). */
  vllmModels: (id: string, maxModelLen: number) => ({
    object: "list",
    data: [
      {
        id,
        object: "model",
        created: 0,
        owned_by: "vllm",
        root: id,
        parent: null,
        max_model_len: maxModelLen,
        permission: [],
      },
    ],
  }),
};
