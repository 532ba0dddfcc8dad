// A worker's memory series under GET /metrics?gc=1 (WorkerMetrics.json with a GC): read
// right after the GC, not after the other metrics were rendered. bench:memory divides their
// growth by the tokens held (issues 43 and 47), so what a scrape allocates must not count.
import { runInNewContext } from "node:vm";
import { setFlagsFromString } from "node:v8";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { WorkerMetrics } from "../../server/worker/worker-metrics.ts";

// The test process has no --expose-gc: the flag set at run time, gc() read from a context made after it.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

type Series = { name: string; values: { value: number }[] };

function heapUsed(json: unknown): number {
  const series = (json as Series[]).find((s) => s.name === "nodejs_heap_size_used_bytes");
  assert.ok(series, "no nodejs_heap_size_used_bytes series");
  return series.values[0]!.value;
}

test("a gc scrape reads the heap the GC left, not what rendering the other metrics allocated", async () => {
  const metrics = new WorkerMetrics(0, () => 0);
  // Thousands of label sets of a histogram rendered before the memory gauges: megabytes of
  // values objects, live until the whole scrape is done.
  for (let i = 0; i < 4000; i++)
    metrics.observeUpstream({ method: "POST", path: `/p${i}`, status: 200, seconds: 0.01 });
  let afterGc = 0;
  const json = metrics.json(() => {
    gc();
    afterGc = process.memoryUsage().heapUsed;
  });
  const read = heapUsed(json);
  assert.ok(Math.abs(read - afterGc) < 512 * 1024, `heap used read ${read}, right after the GC ${afterGc}`);
});

test("a scrape without gc reads the memory at scrape time", async () => {
  const metrics = new WorkerMetrics(0, () => 0);
  // After a full GC: garbage of the files before this one (test:fast batches them) collected
  // between the two readings would hide the growth.
  gc();
  const before = process.memoryUsage().heapUsed;
  const held = Array.from({ length: 200_000 }, (_, i) => ({ i }));
  const read = heapUsed(metrics.json());
  assert.ok(read > before + 2 * 1024 * 1024, `heap used read ${read}, before ${before}, ${held.length} objects since`);
});

test.run();
