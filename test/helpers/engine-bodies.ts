// The bodies of the stock engine APIs as the simulated engine answers them (SGLang's
// /generate, vLLM's /v1/completions). Declared, not validated: the tests' assertions
// check them.

export interface GenerateReply {
  text: string;
  output_ids: number[];
  meta_info: {
    id: string;
    finish_reason: { type: "stop"; matched: number | string } | { type: "length"; length: number };
    prompt_tokens: number;
    completion_tokens: number;
    cached_tokens: number;
    input_token_logprobs?: unknown[];
    output_token_logprobs?: Array<[number, number, null]>;
    output_top_logprobs?: Array<Array<[number, number, null]>>;
    routed_experts?: string;
  };
}

export interface CompletionsReply {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: Array<{
    index: number;
    text: string;
    logprobs: {
      text_offset: number[];
      token_logprobs: number[];
      tokens: string[];
      top_logprobs: Array<Record<string, number>>;
    } | null;
    finish_reason: "stop" | "length";
    stop_reason: number | string | null;
    token_ids: number[] | null;
    prompt_token_ids: number[] | null;
  }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}
