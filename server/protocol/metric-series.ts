// Metric series, the router's and the workers': counters, gauges and histograms kept as plain
// numbers, read as the JSON that GET /metrics merges (server/router/router-metrics.ts, with
// prom-client's AggregatorRegistry.aggregate, loaded on the first scrape: per metric {name,
// help, type, values, aggregator}, a value {value, labels, metricName?}; a histogram's buckets
// cumulative, `le` first, then +Inf, _sum and _count). A worker sends its own over the shard
// protocol (op "metrics"). Both processes used prom-client's registries; loading prom-client
// (and the OpenTelemetry API it pulls in) at start cost each ~25-35 ms of CPU for a few dozen
// numbers. Label sets keep the order they were given in, a set's own labels (a worker's shard)
// last, as prom-client does.

export type Labels = Record<string, string>;

interface Value {
  value: number;
  /** A histogram bucket's `le` is its bound as a number (or "+Inf"), as prom-client gives it. */
  labels: Record<string, string | number>;
  metricName?: string;
}

export interface MetricJson {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram";
  values: Value[];
  aggregator: "sum";
}

interface Options {
  name: string;
  help: string;
  labelNames?: readonly string[];
}

/** A label set's key: its names sorted, so {a, b} and {b, a} are one series. */
const keyOf = (labels: Labels) =>
  Object.keys(labels)
    .sort()
    .map((name) => `${name}:${labels[name]}`)
    .join(",");

interface Readable {
  readonly name: string;
  json(): MetricJson;
}

abstract class Metric<Entry> implements Readable {
  readonly name: string;
  readonly help: string;
  protected readonly labelNames: readonly string[];
  protected series = new Map<string, Entry>();

  constructor(set: MetricSet, { name, help, labelNames = [] }: Options) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    set.add(this);
  }

  /** The series with `labels`, made on first use (its label names checked then: a known key has known names). */
  protected entry(labels: Labels, make: (labels: Labels) => Entry): Entry {
    const key = keyOf(labels);
    let entry = this.series.get(key);
    if (!entry) {
      for (const name of Object.keys(labels))
        if (!this.labelNames.includes(name)) throw new Error(`${this.name}: no label named ${name}`);
      this.series.set(key, (entry = make({ ...labels })));
    }
    return entry;
  }

  /** Forgets every series (a gauge whose collect sets all it has). */
  reset(): void {
    this.series.clear();
  }

  abstract json(): MetricJson;
}

interface Scalar {
  value: number;
  labels: Labels;
}

abstract class ScalarMetric extends Metric<Scalar> {
  constructor(set: MetricSet, options: Options) {
    super(set, options);
    // A metric without labels is one series, there (at 0) from the start.
    if (this.labelNames.length === 0) this.entry({}, (labels) => ({ value: 0, labels }));
  }

  protected add(labels: Labels, amount: number): void {
    this.entry(labels, (l) => ({ value: 0, labels: l })).value += amount;
  }
}

export class Counter extends ScalarMetric {
  /** Drops the series with exactly these labels (a label value no longer in use). */
  remove(labels: Labels): void {
    this.series.delete(keyOf(labels));
  }

  /** Adds `amount` (default 1, never negative) to the series with `labels`. */
  inc(labelsOrAmount?: Labels | number, amount?: number): void {
    const labels = typeof labelsOrAmount === "object" ? labelsOrAmount : {};
    const by = typeof labelsOrAmount === "number" ? labelsOrAmount : (amount ?? 1);
    if (!(by >= 0)) throw new Error(`${this.name}: a counter cannot go down (${by})`);
    this.add(labels, by);
  }

  json(): MetricJson {
    return { name: this.name, help: this.help, type: "counter", values: [...this.series.values()], aggregator: "sum" };
  }
}

export class Gauge extends ScalarMetric {
  readonly #collect: ((gauge: Gauge) => void) | undefined;

  /** `collect` runs before each read, to set what the gauge shows then. */
  constructor(set: MetricSet, options: Options & { collect?: (gauge: Gauge) => void }) {
    super(set, options);
    this.#collect = options.collect;
  }

  set(labelsOrValue: Labels | number, value?: number): void {
    const labels = typeof labelsOrValue === "object" ? labelsOrValue : {};
    this.entry(labels, (l) => ({ value: 0, labels: l })).value =
      typeof labelsOrValue === "number" ? labelsOrValue : value!;
  }

  inc(labels: Labels = {}, amount = 1): void {
    this.add(labels, amount);
  }

  dec(labels: Labels = {}, amount = 1): void {
    this.add(labels, -amount);
  }

  json(): MetricJson {
    this.#collect?.(this);
    return { name: this.name, help: this.help, type: "gauge", values: [...this.series.values()], aggregator: "sum" };
  }
}

interface Distribution {
  labels: Labels;
  /** Observations per bucket (not cumulative), the last one past every bound. */
  counts: number[];
  sum: number;
  count: number;
}

export class Histogram extends Metric<Distribution> {
  readonly #bounds: readonly number[];

  constructor(set: MetricSet, options: Options & { buckets: readonly number[] }) {
    super(set, options);
    this.#bounds = [...options.buckets].sort((a, b) => a - b);
    // Without labels, one series, there (all zeros) from the start.
    if (this.labelNames.length === 0) this.#distribution({});
  }

  #distribution(labels: Labels): Distribution {
    return this.entry(labels, (l) => ({
      labels: l,
      counts: new Array<number>(this.#bounds.length + 1).fill(0),
      sum: 0,
      count: 0,
    }));
  }

  /** Observes `value` (seconds, bytes…) in the series with `labels`, or the one series without. */
  observe(labelsOrValue: Labels | number, value?: number): void {
    const labels = typeof labelsOrValue === "object" ? labelsOrValue : {};
    const seconds = typeof labelsOrValue === "number" ? labelsOrValue : value!;
    const d = this.#distribution(labels);
    let i = 0;
    while (i < this.#bounds.length && seconds > this.#bounds[i]!) i++;
    d.counts[i]!++;
    d.sum += seconds;
    d.count++;
  }

  /** Starts timing; the returned function observes the seconds since, with both label sets. */
  startTimer(labels: Labels): (more: Labels) => void {
    const start = process.hrtime.bigint();
    return (more) => this.observe({ ...labels, ...more }, Number(process.hrtime.bigint() - start) / 1e9);
  }

  json(): MetricJson {
    const values: Value[] = [];
    for (const d of this.series.values()) {
      let cumulative = 0;
      this.#bounds.forEach((le, i) => {
        cumulative += d.counts[i]!;
        values.push({ value: cumulative, labels: { le, ...d.labels }, metricName: `${this.name}_bucket` });
      });
      values.push({ value: d.count, labels: { le: "+Inf", ...d.labels }, metricName: `${this.name}_bucket` });
      values.push({ value: d.sum, labels: { ...d.labels }, metricName: `${this.name}_sum` });
      values.push({ value: d.count, labels: { ...d.labels }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: "histogram", values, aggregator: "sum" };
  }
}

/** One process's metrics (the router's, a worker's), in the order they were made, each value with the set's own labels added last. */
export class MetricSet {
  readonly #metrics: Readable[] = [];
  readonly #labels: Labels;

  constructor(labels: Labels = {}) {
    this.#labels = labels;
  }

  add(metric: Readable): void {
    if (this.#metrics.some((m) => m.name === metric.name)) throw new Error(`metric ${metric.name} made twice`);
    this.#metrics.push(metric);
  }

  json(): MetricJson[] {
    return this.#metrics.map((metric) => {
      const json = metric.json();
      json.values = json.values.map((v) => ({ ...v, labels: { ...v.labels, ...this.#labels, ...v.labels } }));
      return json;
    });
  }
}
