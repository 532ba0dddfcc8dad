// The names of the TITO model families, in the order `--tito-family` lists them: the one
// list (and the roles any of them can append). It imports nothing, so the host (which takes only types from sessions/) validates
// `--tito-family` against it without loading a family (test/architecture-rules.ts).

/** Every family, in the order `--tito-family` lists them. */
export const FAMILY_NAMES = [
  "default",
  "qwen3",
  "qwennext",
  "qwen35",
  "nemotron3",
  "glm47",
  "kimi25",
  "kimi26",
  "minimax_m25",
  "minimax_m27",
  "deepseekv32",
  "deepseekv4",
  "inkling",
  "llama3",
  "gemma3",
] as const;

export type TitoFamilyName = (typeof FAMILY_NAMES)[number];

export const isFamilyName = (name: unknown): name is TitoFamilyName =>
  typeof name === "string" && (FAMILY_NAMES as readonly string[]).includes(name);

/**
 * The roles a turn may append in at least one family (each family's appendRoles is a subset
 * of these: test/sessions/families/families.test.ts). The host refuses any other
 * `--allowed-append-roles` entry before it spawns a worker; whether the chosen family can
 * append a role is the worker's check, as it needs the tokenizer folder's template.
 */
export const APPENDABLE_ROLES: readonly string[] = ["tool", "user", "system", "assistant"];
