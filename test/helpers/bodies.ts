// The JSON bodies tests read back, as docs/http.md documents them (and as an SGLang-shaped
// engine answers them). Declared, not validated: a type names what a test expects to read,
// and the test's assertions check it.
import type { SupervisionEvent, TreeSnapshot } from "../../index.ts";
import type { Mismatch } from "../../sessions/index.ts";

export interface ErrorBody {
  error: string;
}

export interface HealthBody {
  status: "ok";
  session_server_instance_id: string;
}

export interface SessionCreatedBody {
  session_id: string;
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A chat message as a client sends it; an assistant reply is sent back as it came. */
export interface WireMessage {
  role: string;
  content?: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

/** `choices[0].message` of a reply (the server refuses one whose content is null). */
export interface AssistantMessage extends WireMessage {
  role: "assistant";
  content: string;
}

export interface MetaInfo {
  id: string;
  prompt_tokens: number;
  completion_tokens: number;
  /** `[logprob, token id]` per generated token. */
  output_token_logprobs: Array<[number, number]>;
  finish_reason: { type: string; matched?: number; length?: number };
  /** base64 of int32 little-endian values: only with routing replay (never in a client's copy). */
  routed_experts?: string;
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: AssistantMessage;
    finish_reason: string | null;
    meta_info: MetaInfo;
  }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/** A record's `request`: the client's body plus the fields the worker forces. */
export interface UpstreamChatBody {
  model?: string;
  messages: WireMessage[];
  tools?: unknown[];
  logprobs: true;
  return_meta_info: true;
  no_stop_trim: false;
  input_ids: number[];
  return_routed_experts?: true;
}

export interface SessionRecord {
  timestamp: number;
  method: string;
  path: string;
  status_code: number;
  /** The weight version current when the turn was sent; null when none was set. */
  weight_version: string | null;
  /** The engine's meta_info.weight_version, when it reported one. */
  engine_weight_version?: string;
  request: UpstreamChatBody;
  response: ChatCompletion;
}

/** `GET /sessions/{id}`. */
export interface SessionBody {
  session_id: string;
  records: SessionRecord[];
  metadata: {
    accumulated_token_ids: number[];
    max_trim_tokens: number;
    tito_family: string;
    /** Present once the session has a turn. */
    tito_session_mismatch?: Mismatch[];
  };
}

export interface SampleTurnBody {
  prompt_start: number;
  completion_start: number;
  completion_end: number;
  finish_reason: string | null;
  weight_version: string | null;
  engine_weight_version?: string;
  truncated?: true;
}

/** `POST /sessions/{id}/samples` as JSON (also a line of examples/rollout.ts's output). */
export interface SampleBody {
  session_id: string;
  status: "completed" | "truncated";
  response_length: number;
  tokens: number[];
  loss_mask: number[];
  rollout_log_probs: number[];
  turns: SampleTurnBody[];
  oldest_weight_version: string | null;
  /** Only with routing replay: `tokens.length - 1` rows. */
  rollout_routed_experts?: number[][];
}

/** `GET /supervision`: the host's tree, as the router was sent it. */
export type SupervisionBody = TreeSnapshot;

/** `GET /supervision/events`. */
export interface EventsBody {
  events: SupervisionEvent[];
}

/** The engine's `GET /v1/models`, proxied. */
export interface ModelsBody {
  object: "list";
  data: Array<{ id: string; object: "model" }>;
}
