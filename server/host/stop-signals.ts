// The host CLI's signal handling (cli.ts): SIGINT/SIGTERM start one clean shutdown, later
// signals are ignored while it runs, a third SIGINT forces the exit.
/**
 * SIGINT/SIGTERM, listened to from before the start (a signal that lands while the server
 * starts, or just after its ready line, must never meet Node's default and kill the host
 * with its children and lock left behind). The first one shuts down — at once, or as soon
 * as the start is done; later ones are ignored while it runs, except that a third SIGINT
 * forces the exit: the process-exit hooks then SIGKILL the children and release the lock.
 */
export class StopSignals {
  #stopping = false;
  #interrupts = 0;
  #onStop: (() => void) | undefined;
  readonly #log: (line: string) => void;

  constructor(log: (line: string) => void) {
    this.#log = log;
    process.on("SIGINT", this.#onSignal);
    process.on("SIGTERM", this.#onSignal);
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  /** Runs `stop` on the first signal (now, if one came already); `stopping` is set either way. */
  whenSignalled(stop: () => void): void {
    this.#onStop = stop;
    if (this.#stopping) stop();
  }

  /** Marks a shutdown that began for another reason (the tree failed): signals are then ignored too. */
  markStopping(): void {
    this.#stopping = true;
  }

  #onSignal = (signal: NodeJS.Signals) => {
    if (signal === "SIGINT") this.#interrupts++;
    if (!this.#stopping) {
      this.#stopping = true;
      this.#log(`tito-server: ${signal}: shutting down (later signals are ignored; a third SIGINT forces the exit)`);
      this.#onStop?.();
    } else if (this.#interrupts >= 3) {
      this.#log("tito-server: third SIGINT: forcing the exit; children are killed");
      process.exit(130);
    } else this.#log(`tito-server: ${signal} ignored: already shutting down`);
  };
}
