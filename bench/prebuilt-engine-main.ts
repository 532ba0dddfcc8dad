// The simulated engine in the benchmarks' pre-built mode (bench/sim-engine-prebuilt.ts):
//   tsx bench/prebuilt-engine-main.ts [engine flags] --prebuilt-tokens N
//     [--prebuilt-turns T] [--prebuilt-r3-last-bytes B]
// N completion tokens per reply; turns 0..T-1 built before the ready line; routed_experts
// growing linearly to B bytes (before base64) on turn T-1. The other flags are
// `npm run engine`'s (server/sim-engine/engine-flags.ts).
import { fail, integer, parseEngineArgs, serveEngine } from "../server/sim-engine/engine-cli.ts";
import { prebuiltReplies } from "./sim-engine-prebuilt.ts";

const PREBUILT_FLAGS = ["prebuilt-tokens", "prebuilt-turns", "prebuilt-r3-last-bytes"] as const;
type PrebuiltFlag = (typeof PREBUILT_FLAGS)[number];

const argv = process.argv.slice(2);
const values: Partial<Record<PrebuiltFlag, string>> = {};
const rest: string[] = [];
for (let i = 0; i < argv.length; i++) {
  const flag = PREBUILT_FLAGS.find((f) => argv[i] === `--${f}`);
  if (flag) values[flag] = argv[++i];
  else rest.push(argv[i]!);
}
const options = parseEngineArgs(rest);
if (values["prebuilt-tokens"] === undefined) fail("--prebuilt-tokens N is required");
const completionTokens = integer("prebuilt-tokens", values["prebuilt-tokens"], 1);
if (completionTokens < 1) fail("--prebuilt-tokens must be at least 1");
const turns = integer("prebuilt-turns", values["prebuilt-turns"], 0);
const lastBytes = integer("prebuilt-r3-last-bytes", values["prebuilt-r3-last-bytes"], 0);
if (lastBytes > 0 && turns < 1) fail("--prebuilt-r3-last-bytes needs --prebuilt-turns");
options.rawReplies = prebuiltReplies({
  completionTokens,
  turns,
  // Grows linearly to lastBytes on turn T-1 (and stays there past it).
  routedExpertsBytesByTurn: lastBytes > 0 ? (k) => Math.round((lastBytes * Math.min(k + 1, turns)) / turns) : undefined,
});
await serveEngine(options);
