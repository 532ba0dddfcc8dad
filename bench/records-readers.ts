// The records readers of `npm run bench:records`' head-of-line phase (issue 47): one curl
// process per concurrent GET, each started again when its GET ends, until told to stop,
// as a trainer or an operator's curl would read records. A small coordinator process
// (plain JS, below) runs them, so the benchmark's own event loop only times chats and no
// byte of records crosses it. It tells "started" once every curl has received a first
// MiB, and at the end the bytes the curls read (what they wrote to /dev/null: /proc/<pid>/io's
// wchar, for the finished GETs and the parts of those stopped), the GETs finished whole, and the CPU the curls took
// from "started" on (their utime + stime, from /proc).
import { spawn, type ChildProcess } from "node:child_process";

const COORDINATOR = `
const { spawn } = require("node:child_process");
const { readFileSync } = require("node:fs");
const [urls, curl, nice] = JSON.parse(process.argv[1]);
const TICK_MS = 1000 / 100; // USER_HZ
const running = new Map(); // curl pid -> its process
let stop = false, bytes = 0, gets = 0, failure;
const stat = (pid) => {
  try {
    const s = readFileSync("/proc/" + pid + "/stat", "latin1");
    return s.slice(s.lastIndexOf(")") + 2).split(" ").map(Number);
  } catch { return undefined; }
};
// Bytes a curl wrote to /dev/null so far (its socket reads are not counted in rchar; the writes of what it read are in wchar).
const written = (pid) => {
  try { return Number(/wchar: (\\d+)/.exec(readFileSync("/proc/" + pid + "/io", "latin1"))[1]); } catch { return 0; }
};
// CPU of this process's reaped children (cutime + cstime), and of one live curl (utime + stime), in ms.
const reapedMs = () => { const f = stat(process.pid); return (f[13] + f[14]) * TICK_MS; };
const liveMs = (pid) => { const f = stat(pid); return f ? (f[11] + f[12]) * TICK_MS : 0; };
function get(url) {
  const args = ["-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download}", url];
  const child = nice > 0 ? spawn("nice", ["-n", String(nice), curl, ...args]) : spawn(curl, args);
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  running.set(child.pid, child);
  child.on("exit", (code, signal) => {
    running.delete(child.pid);
    if (stop) return;
    if (code !== 0) { failure = "curl exited " + (signal ?? code) + ": " + out.trim(); return finish(); }
    bytes += Number(out); gets++;
    get(url);
  });
}
let cpuAtStart = 0;
function waitStarted() {
  const flowing = [...running.keys()].filter((pid) => written(pid) > 1 << 20).length;
  if (failure) return;
  if (flowing < urls.length) return void setTimeout(waitStarted, 5);
  cpuAtStart = reapedMs() + [...running.keys()].reduce((n, pid) => n + liveMs(pid), 0);
  bytes = -[...running.keys()].reduce((n, pid) => n + written(pid), 0);
  process.send({ started: true });
}
async function finish() {
  stop = true;
  for (const [pid, child] of running) { bytes += written(pid); child.kill("SIGKILL"); }
  while (running.size > 0) await new Promise((r) => setTimeout(r, 5));
  const cpuMs = reapedMs() - cpuAtStart;
  process.send(failure ? { error: failure } : { bytes, gets, cpuMs }, () => process.disconnect());
}
process.on("message", () => void finish());
// The benchmark died: no curl outlives it.
process.on("disconnect", () => { for (const child of running.values()) child.kill("SIGKILL"); process.exit(0); });
for (const url of urls) get(url);
waitStarted();
`;

export interface ReadersDone {
  /** Bytes the curls read from "started" to "stop" (headers included: a few hundred bytes per GET). */
  bytes: number;
  /** GETs read whole from "started" on. */
  gets: number;
  /** CPU ms the curls took from "started" to "stop". */
  cpuMs: number;
}

/** The readers of `urls` (one curl each, over and over), at nice `nice`; resolves once every one flows. */
export class CurlReaders {
  readonly #proc: ChildProcess;
  readonly #messages: Array<{ started?: boolean; error?: string } & Partial<ReadersDone>> = [];
  #wake: (() => void) | undefined;

  private constructor(urls: string[], nice: number) {
    this.#proc = spawn(process.execPath, ["-e", COORDINATOR, JSON.stringify([urls, "curl", nice])], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.#proc.on("message", (m) => this.#push(m as never));
    this.#proc.once("exit", (code, signal) => {
      if (code !== 0) this.#push({ error: `the readers' coordinator exited with ${signal ?? `code ${code}`}` });
    });
  }

  static async start(urls: string[], nice: number): Promise<CurlReaders> {
    const readers = new CurlReaders(urls, nice);
    try {
      await readers.#next();
    } catch (err) {
      readers.kill();
      throw err;
    }
    return readers;
  }

  /** The coordinator's pid (its own CPU is small: it only waits on the curls). */
  get pid(): number {
    return this.#proc.pid!;
  }

  /** Stops every curl; what they read and took since "started". */
  async stop(): Promise<ReadersDone> {
    this.#proc.send("stop");
    const done = await this.#next();
    return { bytes: done.bytes!, gets: done.gets!, cpuMs: done.cpuMs! };
  }

  kill(): void {
    if (this.#proc.exitCode === null && this.#proc.signalCode === null) this.#proc.kill("SIGKILL");
  }

  #push(m: { started?: boolean; error?: string } & Partial<ReadersDone>): void {
    this.#messages.push(m);
    this.#wake?.();
  }

  async #next() {
    while (this.#messages.length === 0) await new Promise<void>((r) => (this.#wake = r));
    const m = this.#messages.shift()!;
    if (m.error) throw new Error(`records GET readers failed: ${m.error}`);
    return m;
  }
}
