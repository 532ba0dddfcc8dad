// Coded errors of the session layer (STYLE.md 2). Every class has a stable `code`
// that is never reused, an HTTP status where it has one, and an optional cause.
// test/sessions/errors.test.ts checks that every code is documented in docs/errors.md.

export class TitoError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, status: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** A tokenizer folder is missing a file or holds one that cannot be read. */
export class TokenizerLoadError extends TitoError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_TOKENIZER_LOAD", 500, message, options);
  }
}
