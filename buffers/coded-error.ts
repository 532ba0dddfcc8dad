// The one coded-error base every layer's errors extend (docs/architecture.md, "Errors").
// A coded error is an expected outcome (a client or the engine at fault, a process gone):
// a stable `code` that is never reused, the HTTP status it maps to, a message, an optional
// cause and optional `data` that crosses a process with it (transport/error-codec.ts), and
// the HTTP headers its response carries (a retryable 503's `retry-after`), so whoever
// writes the response takes status and headers from the error, never from its own branch.
// A broken internal invariant is not one of these: that is a bug, and uses node:assert.

export interface CodedErrorOptions {
  cause?: unknown;
  data?: unknown;
  /** Headers of the HTTP response this error becomes, lower-case names (e.g. `retry-after`). */
  headers?: Readonly<Record<string, string>>;
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

export class CodedError extends Error {
  readonly code: string;
  readonly status: number;
  readonly data: unknown;
  readonly headers: Readonly<Record<string, string>>;
  constructor(code: string, status: number, message: string, options?: CodedErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.data = options?.data;
    this.headers = options?.headers ?? NO_HEADERS;
  }
}
