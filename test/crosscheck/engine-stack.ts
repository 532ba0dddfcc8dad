// The engine's stack for the cross-check (issue 39), as a Node API: Python's jinja2 set up as
// transformers sets it up, after SGLang's message preparation (render.py, one long-lived
// /usr/bin/python3 process speaking JSON lines), and HF's Rust tokenizers through the npm
// `tokenizers` binding (a prebuilt binary inside the registry package).
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createInterface, type Interface } from "node:readline";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
/** Debian's python3 (python3-jinja2 is installed for it; .ci/run installs it when missing). */
export const PYTHON = process.env.TITO_CROSSCHECK_PYTHON ?? "/usr/bin/python3";

export interface PythonRenderRequest {
  template: string;
  /** The request body as the client sent it (JSON text): Python reads it with json.loads. */
  body: string;
  add_generation_prompt: boolean;
  /** Render variables besides messages/tools/add_generation_prompt: special tokens, kwargs, helper names. */
  context: Record<string, unknown>;
  /** Names of tito's newline-strip helpers the template may call (chat-template.ts NEWLINE_STRIPS). */
  helpers?: string[];
}

/** One render.py process; renders one request at a time, in order. */
export class PythonRenderer {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #lines: Interface;
  readonly #waiting: Array<(line: string) => void> = [];
  #stderr = "";

  constructor() {
    if (!existsSync(PYTHON))
      throw new Error(`${PYTHON} not found: the cross-check needs Debian's python3 with python3-jinja2`);
    this.#child = spawn(PYTHON, [join(HERE, "render.py")], { stdio: ["pipe", "pipe", "pipe"] });
    this.#child.stderr.on("data", (chunk: Buffer) => (this.#stderr += chunk.toString()));
    this.#lines = createInterface({ input: this.#child.stdout });
    this.#lines.on("line", (line) => this.#waiting.shift()?.(line));
    this.#child.on("exit", (code) => {
      for (const waiter of this.#waiting.splice(0))
        waiter(JSON.stringify({ error: `render.py exited ${code}: ${this.#stderr}` }));
    });
  }

  /** The text, or `{error}` when the template (or Python's JSON reading) refused the request. */
  render(request: PythonRenderRequest): Promise<{ text?: string; error?: string }> {
    return new Promise((resolve) => {
      this.#waiting.push((line) => resolve(JSON.parse(line) as { text?: string; error?: string }));
      this.#child.stdin.write(JSON.stringify(request) + "\n");
    });
  }

  close(): void {
    this.#lines.close();
    this.#child.stdin.end();
    this.#child.kill();
  }
}

interface RustEncoding {
  getIds(): number[];
}
interface RustTokenizer {
  tokenToId(token: string): number | null;
  encode(text: string, pair?: string | null, options?: { addSpecialTokens?: boolean }): Promise<RustEncoding>;
  decode(ids: number[], skipSpecialTokens: boolean): Promise<string>;
}

const require = createRequire(import.meta.url);
const rust = require("tokenizers") as { Tokenizer: { fromFile(path: string): RustTokenizer } };

/**
 * HF's Rust tokenizer on a folder's tokenizer.json, encoding as apply_chat_template does (no
 * special tokens added). The Rust library numbers added tokens itself (the vocabulary size
 * on up, in file order), whatever ids the file gives them: a test folder whose added tokens
 * sit at a model's real ids past a small vocabulary (the synthetic folders, gpt-oss with
 * Inkling's tokens overlaid) gets other ids for them. Those are mapped back to the file's
 * ids (`renumbered` counts them): the text each id stands for is the same.
 */
export class RustTokens {
  readonly #tokenizer: RustTokenizer;
  readonly #back = new Map<number, number>();
  /**
   * `added`: tokenizer.json's added_tokens as the file gives them (a TokenizerFolder's library
   * keeps them verbatim, `folder.tokenizer.added_tokens`); read from the file when not given
   * (parsing the whole file again is about half the Rust load's CPU).
   */
  constructor(dir: string, added?: ReadonlyArray<{ id: number; content: string }>) {
    const file = join(dir, "tokenizer.json");
    this.#tokenizer = rust.Tokenizer.fromFile(file);
    added ??= (JSON.parse(readFileSync(file, "utf8")) as { added_tokens?: Array<{ id: number; content: string }> })
      .added_tokens;
    for (const token of added ?? []) {
      const id = this.#tokenizer.tokenToId(token.content);
      if (id !== null && id !== token.id) this.#back.set(id, token.id);
    }
  }
  /** How many added tokens the Rust library numbered differently from the file. */
  get renumbered(): number {
    return this.#back.size;
  }
  async encode(text: string): Promise<number[]> {
    if (text === "") return [];
    const ids = (await this.#tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
    return this.#back.size === 0 ? ids : ids.map((id) => this.#back.get(id) ?? id);
  }
}
