// The clients bench:hop times requests with (issue 47): the benchmark's own undici pool
// (in-process), Node's fetch in a child process, and curl, so that a client's CPU is
// not the server's and a figure does not depend on one client library. Each sends one
// block of identical sequential requests on one keep-alive connection and answers each
// request's latency in µs. Beside them, two clients below HTTP: a channel to a tito
// worker's own socket (the shard op a route becomes, sent without the router) and a frame
// to the bare topology's worker (bench/bare-topology.ts), so that what the router's HTTP
// side adds can be told from what the worker does, route by route.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFileSync, readdirSync, readlinkSync, writeFileSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { connectChannel, type Channel } from "../transport/index.ts";
import { requestShard, type ShardRequest } from "../server/protocol/shard-protocol.ts";
import { requestPayload } from "./bare-topology.ts";

export type ClientKind = "inproc" | "child" | "curl";
export const CLIENT_KINDS: readonly ClientKind[] = ["inproc", "child", "curl"];

/** One kind of request: sent `n` times in a row by a client. */
export interface Call {
  method: "GET" | "POST";
  path: string;
  body?: string;
  status: number;
}

export interface HttpClient {
  /** Sends `call` n times, one after the other; the latency of each, µs. */
  block(call: Call, n: number): Promise<number[]>;
  close(): Promise<void>;
}

const JSON_HEADERS = { "content-type": "application/json" };

/** The benchmark's own undici pool: one connection, kept alive. */
export function inprocClient(origin: string): HttpClient {
  const pool = new Pool(origin, { connections: 1, keepAliveTimeout: 60_000 });
  return {
    async block(call, n) {
      const out: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const res = await pool.request({
          method: call.method,
          path: call.path,
          body: call.body,
          headers: call.body === undefined ? undefined : JSON_HEADERS,
        });
        await res.body.dump({ limit: Number.POSITIVE_INFINITY });
        if (res.statusCode !== call.status)
          throw new Error(`${call.method} ${call.path}: status ${res.statusCode}, want ${call.status}`);
        out.push((performance.now() - t0) * 1000);
      }
      return out;
    },
    close: () => pool.close(),
  };
}

// Plain JS for the child: Node's fetch (undici's global agent keeps the connection alive).
const CHILD = `
process.on("message", async (m) => {
  const out = [];
  try {
    for (let i = 0; i < m.n; i++) {
      const t0 = performance.now();
      const res = await fetch(m.url, { method: m.method, body: m.body, headers: m.body === undefined ? undefined : { "content-type": "application/json" } });
      await res.arrayBuffer();
      if (res.status !== m.status) throw new Error(m.method + " " + m.url + ": status " + res.status + ", want " + m.status);
      out.push((performance.now() - t0) * 1000);
    }
    process.send({ out });
  } catch (err) {
    process.send({ error: String(err && err.message || err) });
  }
});
process.on("disconnect", () => process.exit(0));
`;

/** Node's fetch in a child process of its own, driven over IPC one block at a time. */
export function childClient(origin: string): HttpClient {
  const child: ChildProcess = spawn(process.execPath, ["-e", CHILD], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return {
    async block(call, n) {
      child.send({ url: origin + call.path, method: call.method, body: call.body, status: call.status, n });
      const [reply] = (await once(child, "message")) as [{ out?: number[]; error?: string }];
      if (reply.error !== undefined) throw new Error(`fetch client: ${reply.error}`);
      return reply.out!;
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.disconnect();
        await once(child, "exit");
      }
    },
  };
}

/**
 * curl, one process per block with the URL given n+1 times: curl reuses its connection
 * for them, and the first (which also connects) is dropped. Each transfer's
 * `time_total`.
 */
export function curlClient(origin: string): HttpClient {
  const bodyFile = join(tmpdir(), `tito-hop-curl-${process.pid}.json`);
  return {
    async block(call, n) {
      const args = ["-s", "-w", "%{http_code} %{time_total}\\n"];
      if (call.method === "POST") {
        writeFileSync(bodyFile, call.body ?? "");
        args.push("-X", "POST", "-H", "content-type: application/json", "--data-binary", `@${bodyFile}`);
      }
      const url = origin + call.path;
      for (let i = 0; i <= n; i++) args.push("-o", "/dev/null", url); // -o holds for one URL each
      const curl = spawn("curl", args, { stdio: ["ignore", "pipe", "inherit"] });
      let text = "";
      curl.stdout.setEncoding("latin1").on("data", (s: string) => (text += s));
      const [code] = (await once(curl, "exit")) as [number | null];
      if (code !== 0) throw new Error(`curl exited with ${code}`);
      const lines = text.trim().split("\n").slice(1);
      return lines.map((line) => {
        const [status, seconds] = line.split(" ");
        if (Number(status) !== call.status)
          throw new Error(`curl ${call.method} ${call.path}: status ${status}, want ${call.status}`);
        return Number(seconds) * 1e6;
      });
    },
    close: () => Promise.resolve(),
  };
}

export function httpClient(kind: ClientKind, origin: string): HttpClient {
  return kind === "inproc" ? inprocClient(origin) : kind === "child" ? childClient(origin) : curlClient(origin);
}

/** The Unix socket `pid` listens on (its own listening socket's path, from /proc/net/unix). */
export function listeningSocketOf(pid: number): string {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  for (const line of readFileSync("/proc/net/unix", "latin1").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    // Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is a listening socket.
    if (f.length >= 8 && f[3] === "00010000" && inodes.has(f[6]!) && f[7]!.endsWith(".sock")) return f[7]!;
  }
  throw new Error(`process ${pid} listens on no .sock`);
}

/** A channel straight to a tito worker: the shard op a route becomes, without the router. */
export async function workerClient(socketPath: string): Promise<{
  block(op: ShardRequest, body: Buffer | undefined, status: number, n: number): Promise<number[]>;
  close(): void;
}> {
  const channel: Channel = await connectChannel(socketPath);
  return {
    async block(op, body, status, n) {
      const out: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const res = await requestShard(channel, op, body);
        await res.body.collect();
        if (res.status !== status) throw new Error(`worker op ${op.op}: status ${res.status}, want ${status}`);
        out.push((performance.now() - t0) * 1000);
      }
      return out;
    },
    close: () => channel.close(),
  };
}

/** Frames straight to the bare topology's worker: [u32 length][u32 id][u16 path length][path][body] (bench/bare-topology.ts). */
export async function bareWorkerClient(socketPath: string): Promise<{
  block(path: string, n: number, body?: string): Promise<number[]>;
  close(): void;
}> {
  const socket: Socket = createConnection(socketPath);
  await once(socket, "connect");
  let pending = Buffer.alloc(0);
  let waiting: (() => void) | undefined;
  socket.on("data", (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 8 && pending.length >= 8 + pending.readUInt32LE(0)) {
      pending = pending.subarray(8 + pending.readUInt32LE(0));
      const done = waiting;
      waiting = undefined;
      done?.();
    }
  });
  return {
    async block(path, n, body) {
      const out: number[] = [];
      const payload = requestPayload(path, body === undefined ? undefined : Buffer.from(body));
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const header = Buffer.allocUnsafe(8);
        header.writeUInt32LE(payload.length, 0);
        header.writeUInt32LE(i, 4);
        const replied = new Promise<void>((resolve) => (waiting = resolve));
        socket.write(Buffer.concat([header, payload]));
        await replied;
        out.push((performance.now() - t0) * 1000);
      }
      return out;
    },
    close: () => socket.destroy(),
  };
}
