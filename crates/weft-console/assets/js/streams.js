// The streams panel: every tag with its next version and entry count,
// fetched page by page from /v1/streams.

import { api } from "./api.js";
import { el } from "./dom.js";

const PAGE = 200;
// A log may hold millions of tags; the panel lists the first ones only.
const MAX_SHOWN = 2000;

export async function loadStreams() {
  const streams = [];
  let after = null;
  for (;;) {
    const page = await api.streams(after, PAGE);
    streams.push(...page.streams);
    if (page.next == null || streams.length >= MAX_SHOWN) {
      return { streams: streams.slice(0, MAX_SHOWN), more: page.next != null };
    }
    after = page.next;
  }
}

export function renderStreams({ streams, more }, onPick) {
  const body = document.querySelector("#streams tbody");
  const rows = streams.map((s) => {
    const row = el(
      "tr",
      { "data-tag": s.tag, title: "open this stream's latest entry" },
      el("td", {}, s.tag),
      el("td", { class: "num", "data-field": "next_version" }, s.next_version),
      el("td", { class: "num", "data-field": "entries" }, s.entries),
    );
    row.addEventListener("click", () => onPick(s));
    return row;
  });
  body.replaceChildren(...rows);
  document.getElementById("streams-count").textContent = more
    ? `(first ${streams.length})`
    : `(${streams.length})`;
}
