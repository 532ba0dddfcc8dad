// One session (docs/viewer.md): a header with its token counts, download buttons, the drift
// report, the token strip of the whole trajectory (token-strip.ts) with a search box, and its
// turns in order with their messages. Token ids, the loss mask, logprobs, turn spans and
// each token's text come from one samples request (`?token_text=1`: the worker decodes, the
// router never loads a tokenizer); messages and the drift report from the records GET.
import { getJson, postJson, request } from "./api.ts";
import { h, saveAs, when } from "./dom.ts";
import { heat, TokenStrip } from "./token-strip.ts";
import type { Mismatch, Sample, SessionRecords, TurnRecordBody, WireMessage } from "./types.ts";

const fact = (label: string, value: string | number, name?: string) =>
  h("div", {}, h("span", {}, label), h("b", { "data-fact": name }, String(value)));

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .map((part) => {
        const p = part as { type?: string; text?: string };
        return p.type === "text" && typeof p.text === "string" ? p.text : JSON.stringify(part);
      })
      .join("\n");
  return content === undefined || content === null ? "" : JSON.stringify(content);
}

function messageBox(m: WireMessage): HTMLElement {
  const box = h("div", { class: `msg ${m.role}` }, h("div", { class: "role" }, m.role));
  if (m.tool_call_id) box.append(h("div", { class: "call-id" }, `for tool call ${m.tool_call_id}`));
  if (m.reasoning_content) box.append(h("pre", { class: "reasoning" }, `(reasoning) ${m.reasoning_content}`));
  const text = contentText(m.content);
  if (text) box.append(h("pre", {}, text));
  for (const call of m.tool_calls ?? [])
    box.append(h("pre", {}, `→ ${call.function?.name ?? "?"}(${call.function?.arguments ?? ""})  [${call.id ?? ""}]`));
  return box;
}

/** Turn k's new messages (those past the previous turn's request and reply) and its reply. */
function turnBox(records: TurnRecordBody[], k: number): HTMLElement {
  const r = records[k]!;
  const sent = r.request.messages ?? [];
  const before = k === 0 ? 0 : (records[k - 1]!.request.messages?.length ?? 0) + 1;
  const reply = r.response.choices?.[0]?.message;
  const engine = r.engine_weight_version ? ` · engine ${r.engine_weight_version}` : "";
  return h(
    "div",
    { class: "turn-box", "data-turn": k },
    h("b", {}, `Turn ${k + 1}`),
    ` · ${when(r.timestamp)} · weight version ${r.weight_version ?? "none"}${engine}`,
    ...sent.slice(before).map(messageBox),
    reply ? messageBox(reply) : h("p", {}, "(no assistant message in the reply)"),
  );
}

function driftList(mismatches: Mismatch[], strip: TokenStrip): HTMLElement {
  if (mismatches.length === 0) return h("p", { "data-drift": 0 }, "No drift: the tokens match a fresh render.");
  return h(
    "ul",
    { "data-drift": mismatches.length },
    ...mismatches.map((m) =>
      h(
        "li",
        {},
        h("span", { class: "badge bad" }, m.type),
        ` ${m.detail} `,
        m.token_start === undefined
          ? "(no single place: the segments differ in number)"
          : h(
              "button",
              { onclick: () => strip.scrollToToken(m.token_start!) },
              `tokens ${m.token_start}–${m.token_end}`,
            ),
      ),
    ),
  );
}

export async function sessionView(root: HTMLElement, id: string, tip: HTMLElement): Promise<() => void> {
  const path = `sessions/${encodeURIComponent(id)}`;
  root.replaceChildren(h("p", {}, `Loading session ${id}…`));
  const [sample, records] = await Promise.all([
    postJson<Sample>(`${path}/samples?token_text=1`, {}),
    getJson<SessionRecords>(path),
  ]);
  const mismatches = records.metadata.tito_session_mismatch ?? [];
  const strip = new TokenStrip(
    {
      tokens: sample.tokens,
      texts: sample.token_texts,
      lossMask: sample.loss_mask,
      logProbs: sample.rollout_log_probs,
      turns: sample.turns,
      drift: mismatches
        .filter((m) => m.token_start !== undefined)
        .map((m) => ({ start: m.token_start!, end: m.token_end! })),
    },
    tip,
  );
  const counts = strip.counts();
  const versions = [...new Set(sample.turns.map((t) => t.weight_version ?? "none"))].join(", ") || "—";

  const download = (label: string, name: string, fetchIt: () => Promise<Response>) =>
    h("button", { onclick: () => void fetchIt().then(async (res) => saveAs(await res.blob(), name)) }, label);
  const samplesPost = (format: string) => () =>
    request(`${path}/samples?format=${format}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });

  const status = h("span", { id: "search-status" });
  let matches: number[] = [];
  let at = 0;
  const jump = (step: number) => {
    if (matches.length === 0) return;
    at = (at + step + matches.length) % matches.length;
    status.textContent = `${at + 1} of ${matches.length}${matches.length === 10_000 ? "+" : ""}`;
    strip.scrollToToken(matches[at]!);
  };
  const search = h("input", { id: "token-search", type: "search", placeholder: "text, or #id", size: 24 });
  search.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    if (matches.length > 0 && (search.dataset.query ?? "") === search.value) return jump(e.shiftKey ? -1 : 1);
    search.dataset.query = search.value;
    matches = strip.search(search.value);
    at = -1;
    if (matches.length === 0) status.textContent = search.value ? "no match" : "";
    else jump(1);
  });

  root.replaceChildren(
    h("h2", {}, "Session ", h("code", {}, id)),
    h(
      "div",
      { class: "facts", id: "session-facts" },
      fact("family", records.metadata.tito_family ?? "—"),
      fact("turns", sample.turns.length, "turns"),
      fact("total tokens", sample.tokens.length, "tokens"),
      fact("tokens in the loss", counts.loss, "loss"),
      fact("masked (0)", counts.masked, "masked"),
      fact("first prompt", counts.prompt, "prompt"),
      fact("weight versions", versions),
      fact("drift entries", mismatches.length, "drift"),
    ),
    h(
      "div",
      { class: "toolbar" },
      download("Download records (JSON)", `${id}.records.json`, () => request(path)),
      download("Download sample (JSON)", `${id}.sample.json`, samplesPost("json")),
      download("Download sample (safetensors)", `${id}.safetensors`, samplesPost("safetensors")),
    ),
    h("section", {}, h("h2", {}, "Drift"), driftList(mismatches, strip)),
    h(
      "section",
      {},
      h("h2", {}, "Tokens"),
      h(
        "div",
        { class: "toolbar legend" },
        h("span", { class: "tok prompt" }, "first prompt"),
        h("span", { class: "tok masked" }, "masked (not in the loss)"),
        h("span", { class: "tok loss", style: `background:${heat(0)}` }, "in the loss, logprob 0"),
        h("span", { class: "tok loss", style: `background:${heat(-1)}` }, "−1"),
        h("span", { class: "tok loss", style: `background:${heat(-5)}` }, "−5"),
        h("span", { class: "tok drift" }, "drift"),
        search,
        status,
      ),
      strip.el,
    ),
    h("section", { id: "turns" }, h("h2", {}, "Turns"), ...records.records.map((_, k) => turnBox(records.records, k))),
  );
  return () => strip.dispose();
}
