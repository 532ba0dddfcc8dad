// The template kwargs of a turn: the server's (`--chat-template-kwargs`), the family's
// pinned ones, and the request's `chat_template_kwargs`. A pinned kwarg is what keeps the
// family's rendering append-only, so neither the server's nor a request's value may
// contradict it. Kwargs of one alias group (DeepSeek's thinking switches) are one switch:
// a request that sets any of them replaces the server's value of all.
// Merged objects are shared per distinct request value, so render memos keyed by the
// kwargs object stay warm.
import { InvalidChatRequestError, PinnedKwargError, SessionConfigError } from "./errors.ts";
import type { TitoFamily } from "./families/index.ts";

type Kwargs = Readonly<Record<string, unknown>>;

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** The server-wide kwargs with the family's pins; a server value that contradicts a pin is a config error. */
export function serverKwargs(family: TitoFamily, configured: Kwargs = {}): Kwargs {
  for (const [key, pinned] of Object.entries(family.pinnedKwargs)) {
    if (key in configured && !same(configured[key], pinned))
      throw new SessionConfigError(
        `chat template kwarg ${key}=${JSON.stringify(configured[key])} contradicts the ${family.name} family, which pins ${key}=${JSON.stringify(pinned)}`,
      );
  }
  return { ...configured, ...family.pinnedKwargs };
}

const MEMO_LIMIT = 256;

export class TurnKwargs {
  readonly #family: TitoFamily;
  readonly #base: Kwargs;
  readonly #merged = new Map<string, Kwargs>();

  constructor(family: TitoFamily, base: Kwargs) {
    this.#family = family;
    this.#base = base;
  }

  get base(): Kwargs {
    return this.#base;
  }

  /** The kwargs a turn renders with, given its request's `chat_template_kwargs` (absent/null: the server's). */
  of(requested: unknown): Kwargs {
    if (requested === undefined || requested === null) return this.#base;
    if (typeof requested !== "object" || Array.isArray(requested))
      throw new InvalidChatRequestError("`chat_template_kwargs` must be an object");
    const request = requested as Record<string, unknown>;
    for (const [key, pinned] of Object.entries(this.#family.pinnedKwargs))
      if (key in request && !same(request[key], pinned))
        throw new PinnedKwargError(this.#family.name, key, pinned, request[key]);
    const memoKey = JSON.stringify(request);
    let merged = this.#merged.get(memoKey);
    if (!merged) {
      const base: Record<string, unknown> = { ...this.#base };
      for (const group of this.#family.kwargAliases ?? [])
        if (group.some((key) => key in request)) for (const key of group) delete base[key];
      merged = { ...base, ...request };
      if (this.#merged.size >= MEMO_LIMIT) this.#merged.clear();
      this.#merged.set(memoKey, merged);
    }
    return merged;
  }
}
