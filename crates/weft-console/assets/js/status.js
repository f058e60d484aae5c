// The writer panel and the summary in the bar: backend, leader or
// follower, the writer lease, the tip.

import { el, setField } from "./dom.js";

// The lease is whatever the backend reports (holder, epoch, expiry...):
// shown as its fields rather than interpreted, so a new field shows up
// without a console change.
export function describeLease(lease) {
  if (lease == null) return "none (this backend has no writer lease)";
  if (typeof lease !== "object") return String(lease);
  return Object.entries(lease)
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join("  ");
}

export function renderStatus(status) {
  const panel = document.getElementById("status");
  setField(panel, "backend", status.backend);
  setField(panel, "role", status.role);
  const first = status.first == null ? "" : `, first ${status.first}`;
  setField(panel, "tip", `${status.tip} (next seqnum${first})`);
  setField(panel, "lease", describeLease(status.lease));
  // A follower names the leader that takes appends, when it knows it.
  setField(panel, "leader", status.role === "leader" ? "this server" : status.leader || "unknown");
  setField(panel, "version", status.version ? `weft ${status.version}` : "–");
  panel.dataset.role = status.role;

  const summary = document.getElementById("summary");
  summary.replaceChildren(
    `${status.backend} · `,
    el("span", { class: `role-${status.role}`, "data-role": status.role }, status.role),
    ` · tip ${status.tip}`,
  );
}

export function renderDisconnected(message) {
  document.getElementById("summary").textContent = `disconnected: ${message}`;
}
