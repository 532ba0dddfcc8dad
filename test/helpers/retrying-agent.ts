// An agent as a careful rollout client writes it, for the chaos test and the soak
// (bench/soak.ts): tool loops through the HTTP front door, where a request that got 502,
// 503 or a connection error is sent again as it was (its reply may have been lost after
// the turn committed; the server then rolls that turn back and generates it again), and
// every request is bounded in time. It remembers, per session, the reply ids it saw
// answered, so the server's records can be held to exactly those.
import { WEATHER_TOOL } from "./server.ts";

export interface AgentStats {
  requests: number;
  /** Answers by status, retried ones included. */
  statuses: Record<number, number>;
  connectionErrors: number;
  /** Requests that had no answer within the time bound (each is a failure). */
  hung: number;
  /** Sends of a request after its first. */
  retries: number;
  turns: number;
  /** Anything a correct server never answers (a 500, a 400 on a valid turn, …): each is a failure. */
  unexpected: string[];
}

export interface AgentOptions {
  /** Bound of one request, body included. */
  timeoutMs: number;
  /** A logical request that keeps failing is given up after this long (a failure). */
  giveUpMs?: number;
  /** Deterministic jitter for the retry pauses. */
  random?: () => number;
}

interface Answer {
  status: number;
  text: string;
  /** How many sends it took. */
  attempts: number;
}

const RETRY_STATUSES = new Set([502, 503]);

export class RetryingClient {
  readonly stats: AgentStats = {
    requests: 0,
    statuses: {},
    connectionErrors: 0,
    hung: 0,
    retries: 0,
    turns: 0,
    unexpected: [],
  };
  readonly #base: string;
  readonly #timeoutMs: number;
  readonly #giveUpMs: number;
  readonly #random: () => number;

  constructor(base: string, options: AgentOptions) {
    this.#base = base;
    this.#timeoutMs = options.timeoutMs;
    this.#giveUpMs = options.giveUpMs ?? 60_000;
    this.#random = options.random ?? Math.random;
  }

  /** Sends until an answer that is not 502/503 arrives; throws once the give-up bound passes. */
  async send(method: string, path: string, body?: unknown): Promise<Answer> {
    const giveUpAt = Date.now() + this.#giveUpMs;
    for (let attempts = 1; ; attempts++) {
      if (attempts > 1) this.stats.retries++;
      this.stats.requests++;
      try {
        const res = await fetch(this.#base + path, {
          method,
          headers: body === undefined ? {} : { "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(this.#timeoutMs),
        });
        const text = await res.text();
        this.stats.statuses[res.status] = (this.stats.statuses[res.status] ?? 0) + 1;
        if (!RETRY_STATUSES.has(res.status)) return { status: res.status, text, attempts };
      } catch (err) {
        if ((err as Error).name === "TimeoutError") {
          this.stats.hung++;
          this.stats.unexpected.push(`${method} ${path}: no answer within ${this.#timeoutMs} ms`);
        } else this.stats.connectionErrors++;
      }
      if (Date.now() > giveUpAt) throw new Error(`${method} ${path}: still failing after ${this.#giveUpMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50 + this.#random() * 200));
    }
  }

  /** Creates the session under the caller's id (201; a 409 after a lost 201 is ours too). */
  async create(id: string): Promise<void> {
    const res = await this.send("PUT", `/sessions/${id}`);
    if (res.status === 201 || (res.status === 409 && res.attempts > 1)) return;
    this.#unexpected(`PUT /sessions/${id}`, res);
  }

  /** One chat turn; the reply's message, or undefined (recorded as unexpected) when it was not a 200. */
  async turn(id: string, messages: unknown[], answered: string[]): Promise<Record<string, unknown> | undefined> {
    const path = `/sessions/${id}/v1/chat/completions`;
    const res = await this.send("POST", path, { model: "m", messages, tools: [WEATHER_TOOL] });
    if (res.status !== 200) {
      this.#unexpected(`POST ${path}`, res);
      return undefined;
    }
    const reply = JSON.parse(res.text) as { id: string; choices: { message: Record<string, unknown> }[] };
    answered.push(reply.id);
    this.stats.turns++;
    return reply.choices[0]!.message;
  }

  /** The reply ids of the session's records, in order (undefined when the GET failed). */
  async recordIds(id: string): Promise<string[] | undefined> {
    const res = await this.send("GET", `/sessions/${id}`);
    if (res.status !== 200) {
      this.#unexpected(`GET /sessions/${id}`, res);
      return undefined;
    }
    const body = JSON.parse(res.text) as { records: { response: { id: string } }[] };
    return body.records.map((r) => r.response.id);
  }

  /** 204; a 404 after a lost 204 is the same delete. */
  async delete(id: string): Promise<void> {
    const res = await this.send("DELETE", `/sessions/${id}`);
    if (res.status === 204 || (res.status === 404 && res.attempts > 1)) return;
    this.#unexpected(`DELETE /sessions/${id}`, res);
  }

  #unexpected(what: string, res: Answer): void {
    this.stats.unexpected.push(`${what}: ${res.status} ${res.text.slice(0, 300)}`);
  }
}

const CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito", "Hanoi", "Perth", "Accra", "Tunis"];

/**
 * A tool loop of `turns` turns on a created session: the model calls the weather tool,
 * the agent answers it, the model replies, the agent asks about the next city, and so on.
 * Returns the reply ids the agent saw answered, in order; stops early when `stop()` says
 * so or a turn fails.
 */
export async function toolLoopSession(
  client: RetryingClient,
  id: string,
  turns: number,
  seed: number,
  stop: () => boolean = () => false,
): Promise<string[]> {
  const answered: string[] = [];
  const city = (k: number) => CITIES[(seed + k) % CITIES.length]!;
  const messages: unknown[] = [
    { role: "system", content: `You are agent ${seed}. Use the tool.` },
    { role: "user", content: `What is the weather in ${city(0)}?` },
  ];
  for (let k = 0; k < turns && !stop(); k++) {
    const message = await client.turn(id, messages, answered);
    if (!message) break;
    messages.push(message);
    const calls = message.tool_calls as { id: string }[] | undefined;
    if (calls && calls.length > 0) {
      messages.push({ role: "tool", tool_call_id: calls[0]!.id, content: `{"temp_c": ${(seed * 7 + k) % 35}}` });
    } else {
      messages.push({ role: "user", content: `And in ${city(k + 1)}?` });
    }
  }
  return answered;
}
