// Benchmark (not a test): the transport channel side by side with a raw baseline over
// the same kind of Unix socket to the same child process. Raw = plain length-prefixed
// writes, in-order replies, no msgpackr, no multiplexing. Prints a table and ratios,
// writes bench/out/transport.json. Run: npm run bench:transport [-- --quick]

import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createConnection, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connectChannel, listenChannels, type Channel } from "../transport/index.ts";

const MiB = 2 ** 20;
const BIG = 64 * MiB;
const OP_ECHO = 1;
const OP_BIG_REPLY = 2;
const OP_SINK = 3;

// ---- the child: serves both protocols ------------------------------------------
async function serve(dir: string): Promise<void> {
  const big = Buffer.alloc(BIG, 0x61);
  await listenChannels(join(dir, "ch.sock"), (ch) =>
    ch.serve(async (req) => {
      if (req.meta.op === OP_BIG_REPLY) return { meta: { ok: 1 }, body: big };
      const parts = await req.body.collect();
      return req.meta.op === OP_ECHO ? { meta: { ok: 1 }, body: parts } : { meta: { ok: 1 } };
    }),
  );
  const raw = createServer((sock) => rawServe(sock, big));
  await new Promise<void>((r) => raw.listen(join(dir, "raw.sock"), r));
  process.stdout.write("ready\n");
  process.stdin.resume();
  process.stdin.on("end", () => process.exit(0));
}

// Raw frame: u32 LE length of what follows | u8 op | payload. Reply: u32 LE length | payload.
function rawServe(sock: Socket, big: Buffer): void {
  const reader = new RawReader((first, rest) => {
    const op = first[0]!;
    if (op === OP_BIG_REPLY) {
      const head = Buffer.allocUnsafe(4);
      head.writeUInt32LE(big.length);
      sock.cork();
      sock.write(head);
      sock.write(big);
      sock.uncork();
    } else if (op === OP_ECHO) {
      const parts = [first.subarray(1), ...rest];
      let n = 0;
      for (const p of parts) n += p.length;
      const head = Buffer.allocUnsafe(4);
      head.writeUInt32LE(n);
      sock.cork();
      sock.write(head);
      for (const p of parts) sock.write(p);
      sock.uncork();
    } else {
      sock.write(Buffer.from([0, 0, 0, 0]));
    }
  });
  sock.on("data", (c) => reader.push(c));
}

/** Splits a length-prefixed byte stream into messages (as lists of slices, no concat). */
class RawReader {
  #need = -1;
  #head: Buffer[] = [];
  #headBytes = 0;
  #parts: Buffer[] = [];
  constructor(readonly onMessage: (first: Buffer, rest: Buffer[]) => void) {}
  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.#need < 0) {
        const n = Math.min(4 - this.#headBytes, chunk.length - off);
        this.#head.push(chunk.subarray(off, off + n));
        this.#headBytes += n;
        off += n;
        if (this.#headBytes < 4) return;
        this.#need = (this.#head.length === 1 ? this.#head[0]! : Buffer.concat(this.#head)).readUInt32LE(0);
        this.#head = [];
        this.#headBytes = 0;
        if (this.#need === 0) this.#emit();
        continue;
      }
      const n = Math.min(this.#need, chunk.length - off);
      this.#parts.push(chunk.subarray(off, off + n));
      this.#need -= n;
      off += n;
      if (this.#need === 0) this.#emit();
    }
  }
  #emit(): void {
    const parts = this.#parts;
    this.#parts = [];
    this.#need = -1;
    this.onMessage(parts[0] ?? Buffer.alloc(1), parts.slice(1));
  }
}

class RawClient {
  #fifo: Array<(bytes: number) => void> = [];
  constructor(readonly sock: Socket) {
    const reader = new RawReader((first, rest) => {
      let n = first.length;
      for (const p of rest) n += p.length;
      this.#fifo.shift()!(n);
    });
    sock.on("data", (c) => reader.push(c));
  }
  request(op: number, payload?: Buffer): Promise<number> {
    const head = Buffer.allocUnsafe(5);
    head.writeUInt32LE(1 + (payload?.length ?? 0));
    head[4] = op;
    this.sock.cork();
    this.sock.write(head);
    if (payload) this.sock.write(payload);
    this.sock.uncork();
    return new Promise((r) => this.#fifo.push(r));
  }
}

// ---- the parent: measures ---------------------------------------------------------
type Call = () => Promise<unknown>;

// Raw and channel calls alternate, one each per round, so load from other processes
// on a shared machine lands on both alike.
async function latencyPair(a: Call, b: Call, n: number): Promise<Array<{ p50: number; p99: number }>> {
  for (let i = 0; i < Math.min(1000, n); i++) {
    await a();
    await b();
  }
  const us: number[][] = [[], []];
  for (let i = 0; i < n; i++) {
    for (const [k, call] of [a, b].entries()) {
      const t = process.hrtime.bigint();
      await call();
      us[k]!.push(Number(process.hrtime.bigint() - t) / 1000);
    }
  }
  return us.map((xs) => {
    xs.sort((x, y) => x - y);
    return { p50: xs[Math.floor(n * 0.5)]!, p99: xs[Math.floor(n * 0.99)]! };
  });
}

async function throughput(call: Call, total: number, inFlight: number): Promise<number> {
  let started = 0;
  const t = process.hrtime.bigint();
  const lane = async () => {
    while (started < total) {
      started++;
      await call();
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return total / (Number(process.hrtime.bigint() - t) / 1e9);
}

/** Runs a and b in alternating rounds and keeps each one's best (least disturbed) round. */
async function bestOfAlternating(
  a: () => Promise<number>,
  b: () => Promise<number>,
  rounds: number,
): Promise<[number, number]> {
  let ra = 0;
  let rb = 0;
  for (let i = 0; i < rounds; i++) {
    ra = Math.max(ra, await a());
    rb = Math.max(rb, await b());
  }
  return [ra, rb];
}

async function mbps(call: Call, reps: number): Promise<number> {
  await call();
  const t = process.hrtime.bigint();
  for (let i = 0; i < reps; i++) await call();
  return (reps * BIG) / MiB / (Number(process.hrtime.bigint() - t) / 1e9);
}

async function channelCall(ch: Channel, op: number, body?: Buffer): Promise<number> {
  const res = await ch.request({ op }, body);
  let n = 0;
  // As the router does: collect a one-frame body, iterate a streamed one.
  if (!res.body.streaming) for (const b of await res.body.collect()) n += b.length;
  else for await (const b of res.body) n += b.length;
  return n;
}

async function main(): Promise<void> {
  const quick = process.argv.includes("--quick");
  const dir = mkdtempSync(join(tmpdir(), "tito-bench-tr-"));
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--serve", dir], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  try {
    await once(child.stdout!, "data");
    const rawSock = createConnection({ path: join(dir, "raw.sock") });
    await once(rawSock, "connect");
    const raw = new RawClient(rawSock);
    const ch = await connectChannel(join(dir, "ch.sock"));
    const kib = Buffer.alloc(1024, 0x62);
    const big = Buffer.alloc(BIG, 0x63);
    const n = quick ? 3000 : 10000;
    const reps = quick ? 2 : 3;
    const rawEcho = () => raw.request(OP_ECHO, kib);
    const chEcho = () => channelCall(ch, OP_ECHO, kib);
    const rows: Array<[string, number, number, string]> = [];
    const [latRaw, latCh] = await latencyPair(rawEcho, chEcho, n);
    rows.push(["1 KiB round trip p50 (µs)", latRaw!.p50, latCh!.p50, "lower is better"]);
    rows.push(["1 KiB round trip p99 (µs)", latRaw!.p99, latCh!.p99, "lower is better"]);
    const [tpRaw, tpCh] = await bestOfAlternating(
      () => throughput(rawEcho, n, 64),
      () => throughput(chEcho, n, 64),
      4,
    );
    rows.push(["1 KiB requests/s, 64 in flight", tpRaw, tpCh, "higher is better"]);
    const [downRaw, downCh] = await bestOfAlternating(
      () => mbps(() => raw.request(OP_BIG_REPLY), reps),
      () => mbps(() => channelCall(ch, OP_BIG_REPLY), reps),
      3,
    );
    rows.push(["64 MiB reply MB/s", downRaw, downCh, "higher is better"]);
    const [upRaw, upCh] = await bestOfAlternating(
      () => mbps(() => raw.request(OP_SINK, big), reps),
      () => mbps(() => channelCall(ch, OP_SINK, big), reps),
      3,
    );
    rows.push(["64 MiB request MB/s", upRaw, upCh, "higher is better"]);

    const fmt = (v: number) => (v >= 100 ? v.toFixed(0) : v.toFixed(1));
    console.log("| metric | raw | channel | channel/raw |\n| --- | ---: | ---: | ---: |");
    for (const [name, r, c] of rows) console.log(`| ${name} | ${fmt(r)} | ${fmt(c)} | ${(c / r).toFixed(2)}x |`);
    const p50Ratio = latCh!.p50 / latRaw!.p50;
    const bigRatio = Math.min(downCh / downRaw, upCh / upRaw);
    console.log(
      `\ntargets: channel p50 <= 1.5x raw: ${p50Ratio.toFixed(2)}x ${p50Ratio <= 1.5 ? "PASS" : "MISS"}; ` +
        `64 MiB throughput >= 60% of raw: ${(bigRatio * 100).toFixed(0)}% ${bigRatio >= 0.6 ? "PASS" : "MISS"}`,
    );
    mkdirSync(fileURLToPath(new URL("./out/", import.meta.url)), { recursive: true });
    writeFileSync(
      fileURLToPath(new URL("./out/transport.json", import.meta.url)),
      JSON.stringify(
        {
          date: new Date().toISOString(),
          quick,
          rows: rows.map(([metric, raw, channel]) => ({ metric, raw, channel, ratio: channel / raw })),
        },
        null,
        2,
      ) + "\n",
    );
    ch.close();
    rawSock.destroy();
  } finally {
    child.stdin!.end();
    if (child.exitCode === null) await once(child, "exit");
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--serve") await serve(process.argv[3]!);
else await main();
