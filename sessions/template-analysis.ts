// What a chat template's syntax tree says about how it must be fed and rendered (issue 39):
// - its content format, as SGLang detects it (detect_jinja_template_content_format in
//   python/sglang/srt/parser/jinja_template_utils.py, sgl-project/sglang@0b9c3848): "openai"
//   when the template's text names image/audio/video/vision anywhere, or a for loop iterates
//   `message.content` / `msg.content` / `m.content` (through filters, tests or a slice);
//   else "string", and SGLang then joins a message's text parts with " " before rendering;
// - whether it carries state from one message to the next in the loop that writes them (a
//   namespace attribute set and read in the body of a loop over `messages` that writes
//   text, as DeepSeek V3's `ns.is_output_first`): then a message rendered against a small
//   synthetic context is not what it renders as in the conversation, and appended messages
//   are rendered as a diff of full renders instead (prompt-builder.ts, "history").
// Both read a fresh parse of the source, before jinja-python.ts rewrites filters.
import { Template } from "@huggingface/jinja";

type Node = { type: string; [key: string]: unknown };

const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null && typeof (v as Node).type === "string";

/** Every node under `value`, depth first (dict literals' keys and values included). */
function* nodes(value: unknown): Generator<Node> {
  if (Array.isArray(value)) for (const item of value) yield* nodes(item);
  else if (value instanceof Map)
    for (const [k, v] of value) {
      yield* nodes(k);
      yield* nodes(v);
    }
  else if (isNode(value)) {
    yield value;
    for (const [key, child] of Object.entries(value)) if (key !== "type") yield* nodes(child);
  }
}

export type ContentFormat = "string" | "openai";

const MEDIA_WORDS = ["image", "audio", "video", "vision"];
const CONTENT_OWNERS = ["message", "msg", "m"];

/** `varname.key` or `varname['key']` (SGLang's _is_attr_access). */
function isAttrAccess(node: Node, varname: string, key: string): boolean {
  if (node.type !== "MemberExpression") return false;
  const object = node.object as Node;
  const property = node.property as Node;
  if (object.type !== "Identifier" || object.value !== varname) return false;
  return node.computed ? property.type === "StringLiteral" && property.value === key : property.value === key;
}

/** The access itself, or under a filter, a test or a slice (SGLang's _is_var_or_elems_access). */
function accesses(node: Node, varname: string, key: string): boolean {
  if (node.type === "FilterExpression" || node.type === "TestExpression")
    return accesses(node.operand as Node, varname, key);
  if (node.type === "MemberExpression" && node.computed && (node.property as Node).type === "SliceExpression")
    return accesses(node.object as Node, varname, key);
  return isAttrAccess(node, varname, key);
}

/** The loop's iterable without a `for … in x if test` filter (jinja2 keeps the test apart from the iterable). */
const iterableOf = (loop: Node): Node => {
  const it = loop.iterable as Node;
  return it.type === "SelectExpression" ? (it.lhs as Node) : it;
};

export function contentFormat(source: string, parsed: unknown = new Template(source).parsed): ContentFormat {
  if (MEDIA_WORDS.some((word) => source.includes(word))) return "openai";
  for (const node of nodes(parsed))
    if (node.type === "For" && CONTENT_OWNERS.some((owner) => accesses(iterableOf(node), owner, "content")))
      return "openai";
  return "string";
}

/** Statement types that write nothing themselves (anything else in a body writes text). */
const SILENT = new Set([
  "If",
  "For",
  "Set",
  "Macro",
  "Break",
  "Continue",
  "Comment",
  "CallStatement",
  "FilterStatement",
]);

function iteratesMessages(loop: Node): boolean {
  let it = iterableOf(loop);
  while (it.type === "FilterExpression" || (it.type === "MemberExpression" && it.computed)) {
    if (it.type === "MemberExpression" && (it.property as Node).type !== "SliceExpression") return false;
    it = (it.type === "FilterExpression" ? it.operand : it.object) as Node;
  }
  return it.type === "Identifier" && it.value === "messages";
}

const attrName = (node: Node): string | undefined =>
  node.type === "MemberExpression" && !node.computed && (node.object as Node).type === "Identifier"
    ? `${(node.object as Node).value as string}.${(node.property as Node).value as string}`
    : undefined;

/** Whether the body of a loop over messages writes text and carries a namespace attribute from one message to the next. */
function loopCarriesState(loop: Node): boolean {
  let writes = false;
  const set = new Set<string>();
  const assignees = new Set<Node>();
  const bodies = [loop.body];
  for (const node of nodes(bodies)) {
    for (const key of ["body", "alternate"])
      if (Array.isArray(node[key]) && (node[key] as unknown[]).some((s) => isNode(s) && !SILENT.has(s.type)))
        writes = true;
    if (node.type === "Set") {
      const name = attrName(node.assignee as Node);
      if (name) {
        set.add(name);
        assignees.add(node.assignee as Node);
      }
    }
  }
  if ((loop.body as unknown[]).some((s) => isNode(s) && !SILENT.has(s.type))) writes = true;
  if (!writes || set.size === 0) return false;
  for (const node of nodes(bodies)) {
    const name = attrName(node);
    if (name && set.has(name) && !assignees.has(node)) return true;
  }
  return false;
}

/** Whether the template carries state across messages in the loop that writes them. */
export function carriesMessageState(source: string, parsed: unknown = new Template(source).parsed): boolean {
  for (const node of nodes(parsed))
    if (node.type === "For" && iteratesMessages(node) && loopCarriesState(node)) return true;
  return false;
}
