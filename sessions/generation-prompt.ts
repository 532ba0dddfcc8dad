// Decides from a chat template's syntax tree whether its generation prompt is a constant
// suffix: render(messages, add_generation_prompt=true) === render(messages, false) + S for
// every message list, with S fixed by the template kwargs. Then a turn needs one render of
// the conversation (which may still throw: that is the client's error) instead of two.
// The proof is syntactic and conservative — any template it cannot prove gets `false`
// and keeps the two renders. It never renders anything itself.
import type { Template } from "@huggingface/jinja";

type Node = { type: string; [key: string]: unknown };

/** Names whose value changes per request, or that call functions (time, exceptions, …). */
const VARYING = new Set([
  "messages",
  "tools",
  "add_generation_prompt",
  "loop",
  "caller",
  "namespace",
  "raise_exception",
  "range",
  "strftime_now",
]);

const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null && typeof (v as Node).type === "string";

/**
 * Names in variable positions (looked up in or assigned to the environment), plus keyword
 * names (macro parameters). Test names, filter names and `a.b` property names are not
 * variables and are skipped. Records whether a call appears anywhere.
 */
function collect(value: unknown, names: Set<string>, found: { call: boolean }): void {
  if (Array.isArray(value)) {
    for (const item of value) collect(item, names, found);
    return;
  }
  if (value instanceof Map) {
    // A dict literal's entries: keys and values are both expressions.
    for (const [key, item] of value) {
      collect(key, names, found);
      collect(item, names, found);
    }
    return;
  }
  if (!isNode(value)) return;
  switch (value.type) {
    case "Identifier":
      names.add(value.value as string);
      return;
    case "BinaryExpression":
      // The operator is a lexer token (`and` has type Identifier), not a variable.
      collect(value.left, names, found);
      collect(value.right, names, found);
      return;
    case "UnaryExpression":
      collect(value.argument, names, found);
      return;
    case "MemberExpression":
      collect(value.object, names, found);
      if (value.computed) collect(value.property, names, found);
      return;
    case "TestExpression":
      collect(value.operand, names, found);
      return;
    case "FilterExpression":
    case "FilterStatement": {
      collect(value.type === "FilterExpression" ? value.operand : value.body, names, found);
      const filter = value.filter as Node;
      if (filter.type !== "Identifier") {
        found.call = true;
        collect(filter, names, found);
      }
      return;
    }
    case "KeywordArgumentExpression":
      collect(value.key, names, found);
      collect(value.value, names, found);
      return;
    case "CallExpression":
    case "CallStatement":
    case "Macro":
      found.call = true;
      break;
  }
  for (const [key, child] of Object.entries(value)) if (key !== "type") collect(child, names, found);
}

/**
 * The variables the generation-prompt block reads, when the template's last statement is
 * `{% if add_generation_prompt %}…{% endif %}` (no else), `add_generation_prompt` appears
 * nowhere else, and the block calls nothing and reads no variable the rest of the
 * template reads, sets or could mutate. Undefined when that does not hold.
 */
export function generationPromptInputs(template: Template): string[] | undefined {
  const body = template.parsed.body as unknown as Node[];
  const last = body[body.length - 1];
  if (!last || last.type !== "If") return undefined;
  const test = last.test as Node;
  if (test.type !== "Identifier" || test.value !== "add_generation_prompt") return undefined;
  if (!Array.isArray(last.alternate) || last.alternate.length > 0) return undefined;

  const rest = new Set<string>();
  const restFound = { call: false };
  collect(body.slice(0, -1), rest, restFound);
  if (rest.has("add_generation_prompt")) return undefined;
  const inputs = new Set<string>();
  const found = { call: false };
  collect(last.body, inputs, found);
  if (found.call) return undefined;
  for (const name of inputs) if (VARYING.has(name) || rest.has(name)) return undefined;
  return [...inputs];
}

/**
 * Whether the template can refuse a conversation as a whole: it names `raise_exception`
 * anywhere (the chat-template convention for "this conversation is not valid"). One that
 * does not refuses only what it cannot render, and the prompt builder's segment renders
 * already render every appended message.
 */
export function mayRefuse(template: Template): boolean {
  const names = new Set<string>();
  collect(template.parsed.body, names, { call: false });
  return names.has("raise_exception");
}

/** Whether every input of the block is a fixed plain value in the render context (or absent). */
export function inputsArePlain(inputs: readonly string[], context: Record<string, unknown>): boolean {
  return inputs.every((name) => {
    const v = context[name];
    return v === undefined || v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean";
  });
}
