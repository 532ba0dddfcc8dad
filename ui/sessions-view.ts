// The sessions list (docs/viewer.md): one page of GET /sessions?detail=1 at a time, each
// session with its family, turns, tokens, last activity, weight versions and drift flags,
// filtered by id prefix on the server (`prefix=`), paged with its `next` cursor.
import { getJson } from "./api.ts";
import { h, when } from "./dom.ts";
import type { SessionPage, SessionSummary } from "./types.ts";

const PAGE = 50;

function driftCell(drift: string[] | null): HTMLElement {
  if (drift === null) return h("span", { class: "badge bad" }, "unknown");
  if (drift.length === 0) return h("span", { class: "badge ok" }, "none");
  return h("span", {}, ...drift.map((d) => h("span", { class: "badge bad" }, d)));
}

function row(s: SessionSummary): HTMLElement {
  return h(
    "tr",
    { "data-session": s.session_id },
    h("td", {}, h("a", { href: `#/session/${encodeURIComponent(s.session_id)}`, class: "mono" }, s.session_id)),
    h("td", {}, s.family),
    h("td", { class: "num" }, s.turns),
    h("td", { class: "num" }, s.tokens),
    h("td", {}, when(s.last_activity)),
    h("td", {}, s.weight_versions.map((v) => v ?? "none").join(", ") || "—"),
    h("td", {}, driftCell(s.drift)),
  );
}

export async function sessionsView(root: HTMLElement): Promise<void> {
  const filter = h("input", { id: "prefix", type: "search", placeholder: "id prefix", size: 34 });
  const body = h("tbody");
  const info = h("span", { id: "page-info" });
  const prev = h("button", { disabled: true }, "← Previous");
  const next = h("button", { disabled: true }, "Next →");
  // The cursors of the pages shown so far: the last one is this page's `after`.
  let cursors: string[] = [""];
  let nextCursor: string | null = null;

  const load = async () => {
    const after = cursors.at(-1)!;
    const query = new URLSearchParams({ detail: "1", limit: String(PAGE), after, prefix: filter.value.trim() });
    const page = await getJson<SessionPage>(`sessions?${query}`);
    nextCursor = page.next;
    body.replaceChildren(...page.sessions.map(row));
    if (page.sessions.length === 0) body.append(h("tr", {}, h("td", { colspan: 7 }, "No sessions.")));
    info.textContent = `page ${cursors.length}, ${page.sessions.length} session(s)`;
    prev.disabled = cursors.length === 1;
    next.disabled = nextCursor === null;
  };
  prev.addEventListener("click", () => {
    cursors.pop();
    void load();
  });
  next.addEventListener("click", () => {
    if (nextCursor === null) return;
    cursors.push(nextCursor);
    void load();
  });
  let typing = 0;
  filter.addEventListener("input", () => {
    clearTimeout(typing);
    typing = window.setTimeout(() => {
      cursors = [""];
      void load();
    }, 250);
  });

  root.replaceChildren(
    h("h2", {}, "Sessions"),
    h("div", { class: "toolbar" }, filter, prev, next, info, h("button", { onclick: () => void load() }, "Refresh")),
    h(
      "table",
      { id: "sessions" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "id"),
          h("th", {}, "family"),
          h("th", { class: "num" }, "turns"),
          h("th", { class: "num" }, "tokens"),
          h("th", {}, "last activity"),
          h("th", {}, "weight versions"),
          h("th", {}, "drift"),
        ),
      ),
      body,
    ),
  );
  await load();
}
