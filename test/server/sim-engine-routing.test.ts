// The simulated engine's routed_experts, shaped as SGLang's: int32 expert ids, one row of
// layers × top-k per token of prompt + completion but the last, on the chat route and
// /generate, with the default shape (Qwen3-30B-A3B's 48 × 8) or a chosen one (options and
// the standalone engine's flags). Then the quickstart's own command — `tito-server serve
// --routing-replay` with no --engine — gives POST /samples with routed experts, no GPU.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { SIM_EXPERTS } from "../../server/sim-engine/sim-engine-payload.ts";
import { startCli } from "../helpers/cli.ts";
import type { ChatCompletion, SampleBody } from "../helpers/bodies.ts";
import { call, newSession, toolLoop } from "../helpers/server.ts";
import { qwen3 } from "../sessions/fixtures.ts";
import { TS_LOADER } from "../helpers/ts-loader.ts";

const ENGINE_MAIN = fileURLToPath(new URL("../../server/sim-engine/engine-main.ts", import.meta.url));
let byDefault: SimEngine;
let small: SimEngine;

test.before(async () => {
  byDefault = await startSimEngine({ tokenizerFolder: qwen3() });
  small = await startSimEngine({ tokenizerFolder: qwen3(), routedExpertsLayers: 3, routedExpertsTopK: 2 });
});
test.after(async () => {
  await byDefault?.close();
  await small?.close();
});

async function post<Body>(base: string, path: string, body: unknown): Promise<Body> {
  const res = await call<Body>(base, "POST", path, body);
  assert.is(res.status, 200, res.text);
  return res.json;
}

/** The payload as int32 values, checked to be whole rows of `width` for `tokens` − 1 tokens. */
function rows(b64: string, tokens: number, width: number): Int32Array {
  const bytes = Buffer.from(b64, "base64");
  assert.is(bytes.length, (tokens - 1) * width * 4, `${tokens - 1} rows of ${width} int32 values`);
  const values = new Int32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  assert.ok(
    values.every((v) => v >= 0 && v < SIM_EXPERTS),
    "expert ids",
  );
  return values;
}

test("chat route: (prompt + completion − 1) × layers × top-k int32 expert ids, default 48 × 8", async () => {
  const messages = [{ role: "user", content: "What is the capital of France?" }];
  for (const [engine, width] of [
    [byDefault, 48 * 8],
    [small, 3 * 2],
  ] as const) {
    const reply = await post<ChatCompletion>(engine.url, "/v1/chat/completions", {
      messages,
      return_routed_experts: true,
    });
    const meta = reply.choices[0].meta_info;
    rows(meta.routed_experts!, meta.prompt_tokens + meta.completion_tokens, width);
  }
});

test("/generate: the same shape from its own token counts", async () => {
  const input_ids = qwen3().encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
  const reply = await post<{ meta_info: { prompt_tokens: number; completion_tokens: number; routed_experts: string } }>(
    small.url,
    "/generate",
    { input_ids, sampling_params: { max_new_tokens: 12 }, return_routed_experts: true },
  );
  assert.is(reply.meta_info.prompt_tokens, input_ids.length);
  rows(reply.meta_info.routed_experts, input_ids.length + reply.meta_info.completion_tokens, 6);
});

test("the standalone engine takes --routed-experts-layers and --routed-experts-top-k", async () => {
  const child = spawn(
    process.execPath,
    [...TS_LOADER, ENGINE_MAIN, "--port", "0", "--routed-experts-layers", "4", "--routed-experts-top-k", "1"],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout!.on("data", (d) => {
        out += d;
        const m = /sim-engine ready url=(\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once("exit", (code) => reject(new Error(`engine exited with ${code}`)));
    });
    const reply = await post<ChatCompletion>(url, "/v1/chat/completions", {
      messages: [{ role: "user", content: "hi" }],
      return_routed_experts: true,
    });
    const meta = reply.choices[0].meta_info;
    rows(meta.routed_experts!, meta.prompt_tokens + meta.completion_tokens, 4);
  } finally {
    child.kill("SIGTERM");
  }
});

test("the quickstart's command (--routing-replay, no --engine): POST /samples has the routed experts", async () => {
  const run = await startCli(["--port", "0", "--workers", "1", "--routing-replay", "--log-level", "warn"]);
  try {
    const id = await newSession(run.url);
    await toolLoop(run.url, id);
    const res = await call<SampleBody>(run.url, "POST", `/sessions/${id}/samples`);
    assert.is(res.status, 200, res.text);
    const routed = res.json.rollout_routed_experts!;
    assert.is(routed.length, res.json.tokens.length - 1, "one row per token but the last");
    assert.ok(
      routed.every((row) => row.length === 48 * 8),
      "rows of 48 layers × top-8",
    );
  } finally {
    run.proc.kill("SIGTERM");
    assert.is((await run.exit).code, 0);
  }
});

test.run();
