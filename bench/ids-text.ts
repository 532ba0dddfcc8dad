// `npm run bench:ids-text` (issue 25): the prompt's ids as decimal text, per turn, three
// ways, for sessions of growing size, each turn adding `--added` ids to the last prompt:
//  - cached: the text of the last checkpoint kept per session (the code before issue 25),
//    so a turn converts only the ids it adds and joins the two strings;
//  - idsText: sessions/ids-text.ts, every id written by a digit encoder each turn;
//  - join: `ids.join(",")` each turn.
// Each is timed up to the request bytes (`Buffer.from` of `{"input_ids":[…]}`, which
// flattens the cached path's joined string), and the cache's bytes per id held are
// printed beside. Not a test: it prints a table and writes JSON.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { idsText } from "../sessions/ids-text.ts";

const { values } = parseArgs({
  options: {
    sizes: { type: "string" },
    added: { type: "string" },
    out: { type: "string" },
  },
});
const sizes = (values.sizes ?? "2000,8000,16000,32000,64000").split(",").map(Number);
const added = Number(values.added ?? 1500);

/** Ids shaped like a real trajectory: mostly 3-6 digits. */
const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => ((i + seed) * 7919) % 151_936);
const request = (text: string) => Buffer.from(`{"input_ids":[${text}]}`, "utf8").length;

/** Median ns per call of `run` over `rounds` rounds of `reps` calls. */
function time(run: () => number, reps: number, rounds = 7): number {
  let sink = 0;
  for (let i = 0; i < reps; i++) sink += run(); // warm-up
  const per: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < reps; i++) sink += run();
    per.push(Number(process.hrtime.bigint() - t0) / reps);
  }
  if (sink === 0) throw new Error("unreachable");
  return per.sort((a, b) => a - b)[rounds >> 1]!;
}

const rows = sizes.map((size) => {
  const before = ids(size, 1);
  const prompt = [...before, ...ids(added, 2)];
  const reps = Math.max(5, Math.round(2_000_000 / prompt.length));
  // The old cache: the checkpoint's text kept, the turn's ids converted and appended.
  const kept = before.join(",");
  const cached = time(() => request(`${kept},${prompt.slice(before.length).join(",")}`), reps);
  const encoder = time(() => request(idsText(prompt)), reps);
  const join = time(() => request(prompt.join(",")), reps);
  return {
    promptIds: prompt.length,
    cachedUs: cached / 1000,
    idsTextUs: encoder / 1000,
    joinUs: join / 1000,
    /** What the cache held per session: its text, one byte per character. */
    cacheBytesPerId: kept.length / before.length,
  };
});

const lines = [
  `| prompt ids (+${added} per turn) | cached µs/turn | idsText µs/turn | join µs/turn | cache bytes per id held |`,
  "| ---: | ---: | ---: | ---: | ---: |",
  ...rows.map(
    (r) =>
      `| ${r.promptIds} | ${r.cachedUs.toFixed(0)} | ${r.idsTextUs.toFixed(0)} | ${r.joinUs.toFixed(0)} | ${r.cacheBytesPerId.toFixed(2)} |`,
  ),
];
process.stdout.write(`${lines.join("\n")}\n`);
if (values.out) writeFileSync(values.out, `${JSON.stringify({ added, rows }, null, 1)}\n`);
