// The rollout view's arithmetic (ui/rollout-view.ts): the chat latency histogram read from
// GET /metrics text, summed over statuses, and quantiles of the turns between two scrapes.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { parseChatLatency, quantile } from "../../ui/rollout-view.ts";

const scrape = (counts: Record<string, [number, number]>) =>
  [
    "# TYPE tito_chat_latency_seconds histogram",
    ...Object.entries(counts).flatMap(([le, [ok, failed]]) => [
      `tito_chat_latency_seconds_bucket{le="${le}",status="200"} ${ok}`,
      `tito_chat_latency_seconds_bucket{le="${le}",status="503"} ${failed}`,
    ]),
    `tito_chat_latency_seconds_count{status="200"} ${counts["+Inf"]![0]}`,
    `tito_chat_latency_seconds_count{status="503"} ${counts["+Inf"]![1]}`,
    'tito_http_requests_total{route="/x",method="GET",status="200"} 99',
  ].join("\n");

test("the histogram is summed over statuses; other series are ignored", () => {
  const h = parseChatLatency(scrape({ "0.1": [3, 1], "1": [8, 2], "+Inf": [10, 2] }));
  assert.is(h.count, 12);
  assert.equal(
    [...h.buckets].sort((a, b) => a[0] - b[0]),
    [
      [0.1, 4],
      [1, 10],
      [Infinity, 12],
    ],
  );
});

test("quantiles of the turns between two scrapes, interpolated inside their bucket", () => {
  const before = parseChatLatency(scrape({ "0.1": [10, 0], "1": [10, 0], "+Inf": [10, 0] }));
  // 100 new turns: 50 at or under 0.1 s, 40 in (0.1, 1], 10 over 1 s.
  const after = parseChatLatency(scrape({ "0.1": [60, 0], "1": [100, 0], "+Inf": [110, 0] }));
  assert.is(quantile(before, after, 0.5), 0.1);
  assert.ok(Math.abs(quantile(before, after, 0.7)! - (0.1 + (20 / 40) * 0.9)) < 1e-9);
  // The 99th turn is over the last finite bound: the bound is all that is known.
  assert.is(quantile(before, after, 0.99), 1);
  assert.is(quantile(after, after, 0.5), null, "no turns in between: no quantile");
});

test.run();
