// The dependency rules of the source tree, as data: which layer may import which, which
// third-party packages each layer may load, and the size limit of a source file. They say
// in code what docs/architecture.md ("Dependency rules") says in words; change both
// together. test/architecture.test.ts reads every source file's imports and checks them
// against this file.

/** A layer: the files whose repository path starts with `path` (a folder ends with "/"). */
export interface Layer {
  name: string;
  path: string;
}

/** The folders (and the lone files) that hold the server's sources, most specific first. */
export const LAYERS: readonly Layer[] = [
  { name: "buffers", path: "buffers/" },
  { name: "transport", path: "transport/" },
  { name: "actors", path: "actors/" },
  { name: "family-names", path: "sessions/families/names.ts" },
  { name: "sessions", path: "sessions/" },
  { name: "engine", path: "engine/" },
  { name: "shard-protocol", path: "server/protocol/" },
  { name: "handoff", path: "server/handoff/" },
  { name: "router", path: "server/router/" },
  { name: "worker", path: "server/worker/" },
  { name: "host", path: "server/host/" },
  { name: "sim-engine", path: "server/sim-engine/" },
  { name: "package-entry", path: "index.ts" },
  { name: "ui", path: "ui/" },
];

/** What a layer may import of ours, besides its own files. */
export interface LayerRule {
  /** Layers it may import in every way. */
  uses: readonly string[];
  /** Layers it may import only with `import type` / `export type` (erased, so nothing is loaded). */
  types?: readonly string[];
  /** Layers it may load only on demand, with a dynamic `import()` (or as types). */
  onDemand?: readonly string[];
  /** The rule in words, printed with a violation. */
  says: string;
}

export const RULES: Readonly<Record<string, LayerRule>> = {
  buffers: { uses: [], says: "buffers/ imports nothing of ours" },
  transport: { uses: ["buffers"], says: "transport/ imports only buffers/ (never sessions/)" },
  // The family name list: sessions/ and the host both take it from here (the host may not load sessions/).
  "family-names": {
    uses: [],
    says: "sessions/families/names.ts imports nothing (the host loads it, so it must not pull in sessions/)",
  },
  sessions: {
    uses: ["buffers", "family-names"],
    says: "sessions/ imports only buffers/: never transport/, and never engine/ (the core calls the engine through the port it defines)",
  },
  engine: { uses: ["sessions", "buffers"], says: "engine/ may import sessions/ and buffers/ only" },
  actors: {
    uses: ["transport", "buffers"],
    says: "actors/ may use transport/ and buffers/, never sessions/ or engine/",
  },
  "shard-protocol": {
    uses: ["transport", "buffers"],
    says: "server/protocol/ (the shard protocol) imports only transport/ and buffers/ (the router imports it, so it must not pull in sessions/ or engine/)",
  },
  // The records handoff (docs/architecture.md): its IPC message, which router, host and
  // worker share, and the response writer with which the worker writes a records GET to the
  // client's socket, and the host its 503 when that worker is gone.
  handoff: {
    uses: ["buffers"],
    says: "server/handoff/ imports only buffers/ (the host loads it, so it must not pull in sessions/ or engine/)",
  },
  router: {
    // actors/: router-main runs the child side of supervision (startChildRuntime).
    uses: ["transport", "buffers", "actors", "shard-protocol"],
    // The records handoff's message type; the response writer is the worker's and the host's.
    types: ["handoff"],
    says: "server/router/ imports transport/, buffers/, actors/ and server/protocol/shard-protocol.ts (and the handoff message's type) — never sessions/, engine/ or a tokenizer",
  },
  worker: {
    // actors/: worker-main runs the child side of supervision (startChildRuntime).
    uses: ["sessions", "engine", "transport", "buffers", "actors", "shard-protocol", "handoff"],
    says: "server/worker/ joins sessions/, engine/ and transport/ (plus buffers/, actors/ for the child runtime, the shard protocol, and the records handoff's response writer)",
  },
  host: {
    // handoff: the records handoff's message, and the host's 503 when it finds its worker gone.
    // family-names: the one list of --tito-family values.
    uses: ["actors", "buffers", "handoff", "family-names"],
    // The children's entry files are started by path, never imported; their config types are.
    types: ["router", "worker", "sessions"],
    onDemand: ["sim-engine"],
    says: "server/host/ sits on actors/ (and buffers/, and the records handoff's response writer); it loads server/sim-engine/ only on demand, and takes only types from the router, the worker and sessions/",
  },
  "sim-engine": {
    uses: ["sessions", "buffers"],
    says: "server/sim-engine/ may import sessions/ (tokenizer, template) and buffers/ only",
  },
  // The viewer's browser modules (docs/viewer.md): the router serves them as files, never imports them.
  ui: {
    uses: [],
    says: "ui/ (the viewer, run in a browser) imports nothing of ours: it talks to the server over HTTP only",
  },
  "package-entry": {
    uses: ["host", "actors", "buffers"],
    types: ["sessions"],
    says: "index.ts re-exports the embedding API (server/host/, actors/); importing the package loads no tokenizer",
  },
};

/** Third-party packages that only some layers may load (any other dependency is free to use). */
export interface PackageRule {
  /** Package names; a name ending in "/" is a scope ("@lenml/"). */
  packages: readonly string[];
  layers: readonly string[];
  says: string;
}

export const PACKAGE_RULES: readonly PackageRule[] = [
  {
    packages: ["@huggingface/tokenizers", "@huggingface/jinja", "@lenml/"],
    layers: ["sessions", "sim-engine"],
    says: "tokenizers and chat templates are loaded by sessions/ (and the simulated engine) only",
  },
  { packages: ["nact"], layers: ["actors"], says: "the actor system (nact) lives in actors/" },
  { packages: ["msgpackr"], layers: ["transport"], says: "the wire codec (msgpackr) lives in transport/" },
  {
    packages: ["fastify", "fastify-plugin"],
    layers: ["router", "sim-engine"],
    says: "only the router and the simulated engine run an HTTP server (Fastify); a worker knows nothing of HTTP servers",
  },
  {
    packages: ["prom-client"],
    layers: ["router", "worker"],
    says: "metrics (prom-client) belong to the router and the workers",
  },
  { packages: ["@node-rs/crc32"], layers: ["buffers"], says: "CRC-32 is buffers/crc32.ts's business" },
  { packages: ["tsx"], layers: ["actors"], says: "only actors/ loads tsx (a child started from a .ts entry)" },
];

/** No source file is longer than this many lines. */
export const MAX_LINES = 400;
