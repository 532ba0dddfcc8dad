// The shapes of the API bodies the viewer reads (docs/http.md), as far as it reads them.

export interface SessionSummary {
  session_id: string;
  family: string;
  turns: number;
  tokens: number;
  last_activity: number | null;
  weight_versions: (string | null)[];
  drift: string[] | null;
}

export interface SessionPage {
  sessions: SessionSummary[];
  next: string | null;
}

export interface SampleTurn {
  prompt_start: number;
  completion_start: number;
  completion_end: number;
  finish_reason: string | null;
  weight_version: string | null;
  engine_weight_version?: string;
  truncated?: true;
}

export interface Sample {
  session_id: string;
  response_length: number;
  tokens: number[];
  loss_mask: number[];
  rollout_log_probs: number[];
  turns: SampleTurn[];
  token_texts: string[];
}

export interface Mismatch {
  type: string;
  segment_index: number;
  expected_text: string;
  actual_text: string;
  detail: string;
  token_start?: number;
  token_end?: number;
}

export interface WireMessage {
  role: string;
  content?: unknown;
  reasoning_content?: string;
  tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[];
  tool_call_id?: string;
}

export interface TurnRecordBody {
  timestamp: number;
  weight_version?: string | null;
  engine_weight_version?: string;
  request: { messages?: WireMessage[] };
  response: { choices?: { message?: WireMessage; finish_reason?: string }[] };
}

export interface SessionRecords {
  session_id: string;
  records: TurnRecordBody[];
  metadata: { tito_family?: string; tito_session_mismatch?: Mismatch[]; accumulated_token_ids?: number[] };
}

export interface ChildState {
  pid: number | null;
  restarts: number;
  state: string;
  index?: number;
}

export interface Tree {
  state: string;
  instance_id: string;
  host_pid: number;
  failure: string | null;
  router: ChildState;
  shards: ChildState[];
}

export interface SupervisionEvent {
  seq: number;
  time: string;
  actor: string;
  kind: string;
  pid: number | null;
  detail: unknown;
}

export interface RolloutState {
  state: string;
  weight_version: string | null;
  held: number;
  in_flight: number;
}
