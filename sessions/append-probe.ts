// Which roles a folder's own chat template renders append-only, found by rendering it at
// startup (issue 39): a template may move a message elsewhere (DeepSeek V3's collects every
// system message into the text before the first turn), refuse it after an assistant turn
// (Gemma 3's alternation check), or change the text before it. Appending such a message
// would give a prompt the template never writes, so the role is left out of the default
// append roles and an append of it is refused with the reason found here. Only families
// that render with the folder's own template are probed: a family's own template or
// encoder is written append-only for the roles it lists.
import type { ChatMessage, ChatRenderer, RenderOptions } from "./chat-template.ts";
import type { TitoFamily } from "./families/index.ts";
import { appendRoles, promptContext, type PromptContext } from "./prompt-builder.ts";
import type { TokenizerFolder } from "./tokenizer-folder.ts";

export interface ProbedRoles {
  /** The family's append roles that the template renders append-only. */
  roles: readonly string[];
  /** Per role left out, why (for the 400 an append of it gets). */
  refused: ReadonlyMap<string, string>;
}

const BASE: ChatMessage[] = [
  { role: "system", content: "Probe system text." },
  { role: "user", content: "Probe user text." },
  { role: "assistant", content: "Probe assistant text." },
];

const CALLED: ChatMessage = {
  role: "assistant",
  content: "",
  tool_calls: [{ id: "call_probe", type: "function", function: { name: "probe_tool", arguments: {} } }],
};

/** The conversation before the appended message, the message, and the last text of the conversation before it. */
function probeCase(role: string): [ChatMessage[], ChatMessage, string] {
  if (role === "tool")
    return [
      [...BASE.slice(0, 2), CALLED],
      { role: "tool", tool_call_id: "call_probe", name: "probe_tool", content: "Probe tool result." },
      BASE[1]!.content as string,
    ];
  return [BASE, { role, content: `Probe appended ${role} text.` }, BASE[2]!.content as string];
}

/** Whether `text` holds `marker` after the last `anchor`. */
const after = (text: string, anchor: string, marker: string) => {
  const at = text.lastIndexOf(anchor);
  return at >= 0 && text.indexOf(marker, at + anchor.length) >= 0;
};

/**
 * Why `role` is not append-only for the renderer, or undefined when it is. The conversation
 * with the message appended (with the generation prompt, and with an assistant reply after
 * it) must render, and hold the message's text after the conversation's last text: a
 * template that moves it elsewhere renders a prompt an increment never reproduces. Where
 * increments are diffs of full renders (`history`), each render must also extend the one
 * before it.
 */
function whyNot(
  renderer: ChatRenderer,
  role: string,
  options: Omit<RenderOptions, "addGenerationPrompt">,
  history: boolean,
): string | undefined {
  const [base, message, anchor] = probeCase(role);
  const render = (messages: ChatMessage[], addGenerationPrompt: boolean) =>
    renderer.render(messages, { ...options, addGenerationPrompt });
  let before: string;
  try {
    before = render(base, false);
  } catch {
    return undefined; // the probe conversation itself does not render: nothing is known, nothing is refused
  }
  let appended: string;
  let replied: string;
  try {
    appended = render([...base, message], true);
    replied = render([...base, message, { role: "assistant", content: "Probe reply." }], false);
  } catch (err) {
    return `the chat template refuses a '${role}' message after an assistant turn (${(err as Error).message})`;
  }
  const text = message.content as string;
  if (!after(appended, anchor, text) || !after(replied, anchor, text))
    return `the chat template does not render a '${role}' message after the turns before it (it moves it elsewhere, e.g. to the top)`;
  if (history && (!appended.startsWith(before) || !replied.startsWith(appended)))
    return `the chat template renders a '${role}' message after an assistant turn by changing the text before it`;
  return undefined;
}

/** The family's append roles the renderer renders append-only; every role when the family has its own renderer. */
export function probeAppendRoles(
  family: TitoFamily,
  renderer: ChatRenderer,
  kwargs: Readonly<Record<string, unknown>>,
): ProbedRoles {
  if (family.template !== undefined || family.renderer !== undefined)
    return { roles: family.appendRoles, refused: new Map() };
  const refused = new Map<string, string>();
  for (const role of family.appendRoles) {
    const why = whyNot(renderer, role, { kwargs }, family.increment === "history" || renderer.carriesState === true);
    if (why !== undefined) refused.set(role, `${why}; found by rendering the template at startup`);
  }
  return { roles: family.appendRoles.filter((role) => !refused.has(role)), refused };
}

/**
 * A session core's prompt context: the family's renderer, its append roles as probed (or the
 * configured ones, checked against them: a role the probe refused is a config error saying
 * why), and why each refused role is refused (for the 400 an append of one gets).
 */
export function probedContext(
  folder: TokenizerFolder,
  family: TitoFamily,
  kwargs: Readonly<Record<string, unknown>>,
  configured?: string[],
): PromptContext {
  const probed = probeAppendRoles(family, promptContext(folder, family).renderer, kwargs);
  const roles = appendRoles(family.name, probed.roles, configured, probed.refused);
  // The kwargs object itself: render memos are keyed by it (prompt-builder.ts).
  const ctx = promptContext(folder, family, kwargs as Record<string, unknown>, roles);
  return { ...ctx, refusedRoles: probed.refused };
}
