// The progress bar of the benchmarks, on stderr and only when stderr is a terminal
// (piped or captured runs stay quiet, so stdout/stderr logs hold only results and
// errors). Redraws at most ten times a second; never writes to stdout.
import { performance } from "node:perf_hooks";

const WIDTH = 28;

export class Progress {
  readonly #enabled: boolean;
  readonly #total: number;
  #done = 0;
  #phase = "";
  #lastDraw = 0;

  constructor(totalTurns: number, enabled = process.stderr.isTTY === true) {
    this.#enabled = enabled;
    this.#total = Math.max(1, totalTurns);
  }

  /** A phase line ("starting server w2") shown in the bar. */
  phase(text: string): void {
    this.#phase = text;
    this.#draw(true);
  }

  tick(turns = 1): void {
    this.#done += turns;
    this.#draw(false);
  }

  /** Prints a line above the bar (TTY only). */
  note(line: string): void {
    if (!this.#enabled) return;
    process.stderr.write(`\r\x1b[2K${line}\n`);
    this.#draw(true);
  }

  finish(): void {
    if (this.#enabled) process.stderr.write("\r\x1b[2K");
  }

  #draw(force: boolean): void {
    if (!this.#enabled) return;
    const now = performance.now();
    if (!force && now - this.#lastDraw < 100) return;
    this.#lastDraw = now;
    const fraction = Math.min(1, this.#done / this.#total);
    const filled = Math.round(fraction * WIDTH);
    const bar = "#".repeat(filled) + "-".repeat(WIDTH - filled);
    const pct = String(Math.floor(fraction * 100)).padStart(3);
    process.stderr.write(`\r\x1b[2K[${bar}] ${pct}% ${this.#done}/${this.#total} turns  ${this.#phase}`);
  }
}
