// The worker's metric series (server/worker/metric-series.ts) against prom-client, which the
// router merges them with: the same counters, gauges and histograms, fed the same values, give
// the same JSON (key order included, which sets the label order of the text) and the same
// Prometheus text once merged by prom-client's AggregatorRegistry, as the router merges them.
import { test } from "uvu";
import * as assert from "uvu/assert";
import * as prom from "prom-client";
import { Counter, Gauge, Histogram, MetricSet } from "../../server/protocol/metric-series.ts";

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];

/** The calls both kinds of metrics take (prom-client's types are its own). */
interface Ops {
  ops: { observe(labels: Record<string, string>, seconds: number): void };
  bytes: { inc(labels: Record<string, string>, amount?: number): void; remove(labels: Record<string, string>): void };
  pause: { observe(seconds: number): void };
  idle: { observe(seconds: number): void };
  perShard: { inc(labels: Record<string, string>, amount?: number): void; dec(labels: Record<string, string>): void };
  plain: { inc(amount?: number): void };
  inflight: { inc(): void; dec(): void };
  kinds: { set(labels: Record<string, string>, value: number): void; reset(): void };
}

/** The same operations on both: ours, and prom-client's with the shard as a default label. */
function both(shard: string) {
  const registry = new prom.Registry();
  registry.setDefaultLabels({ shard });
  const registers = [registry];
  const set = new MetricSet({ shard });
  let sessions = 3;
  const theirs = {
    ops: new prom.Histogram({
      name: "t_ops_seconds",
      help: "ops",
      labelNames: ["op", "status"],
      buckets: BUCKETS,
      registers,
    }),
    bytes: new prom.Counter({ name: "t_bytes_total", help: "bytes", labelNames: ["op"], registers }),
    pause: new prom.Histogram({ name: "t_pause_seconds", help: "pause", buckets: BUCKETS, registers }),
    idle: new prom.Histogram({ name: "t_idle_seconds", help: "never observed", buckets: BUCKETS, registers }),
    perShard: new prom.Gauge({ name: "t_per_shard", help: "per shard", labelNames: ["shard_index"], registers }),
    plain: new prom.Counter({ name: "t_plain_total", help: "plain", registers }),
    inflight: new prom.Gauge({ name: "t_inflight", help: "inflight", registers }),
    kinds: new prom.Gauge({ name: "t_kinds", help: "kinds", labelNames: ["kind"], registers }),
    sessions: new prom.Gauge({
      name: "t_sessions",
      help: "sessions",
      registers,
      collect() {
        this.set(sessions);
      },
    }),
  };
  const ours = {
    ops: new Histogram(set, { name: "t_ops_seconds", help: "ops", labelNames: ["op", "status"], buckets: BUCKETS }),
    bytes: new Counter(set, { name: "t_bytes_total", help: "bytes", labelNames: ["op"] }),
    pause: new Histogram(set, { name: "t_pause_seconds", help: "pause", buckets: BUCKETS }),
    idle: new Histogram(set, { name: "t_idle_seconds", help: "never observed", buckets: BUCKETS }),
    perShard: new Gauge(set, { name: "t_per_shard", help: "per shard", labelNames: ["shard_index"] }),
    plain: new Counter(set, { name: "t_plain_total", help: "plain" }),
    inflight: new Gauge(set, { name: "t_inflight", help: "inflight" }),
    kinds: new Gauge(set, { name: "t_kinds", help: "kinds", labelNames: ["kind"] }),
    sessions: new Gauge(set, { name: "t_sessions", help: "sessions", collect: (g) => g.set(sessions) }),
  };
  for (const m of [theirs as unknown as Ops, ours as Ops]) {
    // Values on and between the bounds, past the last, and label sets given in either order.
    for (const seconds of [0.0005, 0.001, 0.002, 0.5, 1, 3, 20]) m.ops.observe({ op: "chat", status: "200" }, seconds);
    m.ops.observe({ status: "400", op: "chat" }, 0.02);
    m.ops.observe({ op: "records", status: "200" }, 0.2);
    m.bytes.inc({ op: "chat" }, 120);
    m.bytes.inc({ op: "chat" }, 30);
    m.bytes.inc({ op: "records" });
    m.bytes.inc({ op: "gone" }, 9);
    m.bytes.remove({ op: "gone" });
    m.pause.observe(0.05);
    m.pause.observe(2);
    m.perShard.inc({ shard_index: "0" });
    m.perShard.inc({ shard_index: "0" }, 2);
    m.perShard.inc({ shard_index: "1" });
    m.perShard.dec({ shard_index: "0" });
    m.plain.inc();
    m.plain.inc(4);
    m.inflight.inc();
    m.inflight.inc();
    m.inflight.dec();
    m.kinds.set({ kind: "code" }, 10);
    m.kinds.set({ kind: "bytecode" }, 20);
    m.kinds.reset();
    m.kinds.set({ kind: "code" }, 11);
  }
  sessions = 7;
  return { registry, set };
}

/**
 * What the router's merge reads of a metric: its fields, and per value the series name, the
 * number, the labels and their order (which is the text's); prom-client's own `exemplar: null`
 * and the order of the other keys are not read.
 */
const read = (json: unknown[]) =>
  (json as { name: string; help: string; type: string; aggregator: string; values: unknown[] }[]).map(
    ({ name, help, type, aggregator, values }) => ({
      name,
      help,
      type,
      aggregator,
      values: (values as { metricName?: string; value: number; labels: Record<string, unknown> }[]).map((v) => ({
        metricName: v.metricName,
        value: v.value,
        labels: v.labels,
        order: Object.keys(v.labels).join(","),
      })),
    }),
  );

test("the same JSON as prom-client's getMetricsAsJSON, label order included", async () => {
  const { registry, set } = both("0");
  const theirs = read(await registry.getMetricsAsJSON());
  assert.equal(read(set.json()), theirs);
  assert.is(theirs.length, 9);
  assert.is(theirs[0]!.values.length, 3 * (BUCKETS.length + 3), "three histogram series");
});

test("merged by AggregatorRegistry as the router merges shards: the same Prometheus text", async () => {
  const a = both("0");
  const b = both("1");
  const theirs = prom.AggregatorRegistry.aggregate([
    await a.registry.getMetricsAsJSON(),
    await b.registry.getMetricsAsJSON(),
  ]);
  // Over the transport the series travel as JSON: parse what a worker would send.
  const sent = [a.set.json(), b.set.json()].map(
    (json) => JSON.parse(JSON.stringify(json)) as prom.MetricObjectWithValues<prom.MetricValue<string>>[],
  );
  const ours = prom.AggregatorRegistry.aggregate(sent);
  const text = await ours.metrics();
  assert.is(text, await theirs.metrics());
  assert.match(text, /^t_ops_seconds_bucket\{le="0\.001",op="chat",status="200",shard="0"\} 2$/m);
  assert.match(text, /^t_ops_seconds_bucket\{le="\+Inf",op="chat",status="200",shard="1"\} 7$/m);
  // Labels in the order the observation gave them, the shard's last.
  assert.match(text, /^t_ops_seconds_count\{status="400",op="chat",shard="0"\} 1$/m);
  assert.match(text, /^t_bytes_total\{op="chat",shard="1"\} 150$/m);
  assert.match(text, /^t_sessions\{shard="0"\} 7$/m);
  assert.not.match(text, /kind="bytecode"/);
  assert.not.match(text, /op="gone"/);
  assert.match(text, /^t_pause_seconds_bucket\{le="0\.1",shard="0"\} 1$/m);
  assert.match(text, /^t_idle_seconds_count\{shard="1"\} 0$/m);
  assert.match(text, /^t_per_shard\{shard_index="0",shard="0"\} 2$/m);
});

test("refusals: a label the metric does not have, a counter going down, a name made twice", () => {
  const set = new MetricSet();
  const counter = new Counter(set, { name: "c_total", help: "c", labelNames: ["op"] });
  assert.throws(() => counter.inc({ route: "x" }), /c_total: no label named route/);
  assert.throws(() => counter.inc({ op: "x" }, -1), /cannot go down/);
  assert.throws(() => new Gauge(set, { name: "c_total", help: "again" }), /made twice/);
  const timer = new Histogram(set, { name: "h_seconds", help: "h", labelNames: ["op", "status"], buckets: [1] });
  timer.startTimer({ op: "x" })({ status: "200" });
  const [, h] = set.json();
  assert.equal(
    h!.values.map((v) => [v.metricName, v.labels]),
    [
      ["h_seconds_bucket", { le: 1, op: "x", status: "200" }],
      ["h_seconds_bucket", { le: "+Inf", op: "x", status: "200" }],
      ["h_seconds_sum", { op: "x", status: "200" }],
      ["h_seconds_count", { op: "x", status: "200" }],
    ],
  );
  assert.equal(
    h!.values.map((v) => v.value).filter((_, i) => i !== 2),
    [1, 1, 1],
  );
});

test.run();
