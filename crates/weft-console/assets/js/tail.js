// The live tail: an EventSource on /v1/subscribe, newest entry on top.
// The browser reconnects by itself and sends Last-Event-ID, which the
// server resumes from; the seqnum check below drops anything seen twice.

import { api } from "./api.js";
import { el } from "./dom.js";
import { decodeBase64, formatTime, preview } from "./payload.js";

// Rows kept in the page; older ones are dropped (they stay in the log).
const MAX_ROWS = 500;

export class Tail {
  constructor(onPick) {
    this.onPick = onPick;
    this.source = null;
    this.next = null; // the seqnum expected next
    this.paused = false;
    this.body = document.querySelector("#tail tbody");
    this.state = document.getElementById("tail-state");
    this.button = document.getElementById("tail-pause");
    this.button.addEventListener("click", () => this.togglePause());
  }

  // Subscribes from `from` (a seqnum), closing any earlier subscription.
  start(from) {
    this.close();
    this.next = from;
    this.setState("connecting…");
    const source = new EventSource(api.subscribeUrl(from));
    this.source = source;
    source.addEventListener("open", () => this.setState("live"));
    source.addEventListener("entry", (event) => this.receive(event));
    source.addEventListener("error", (event) => {
      if (this.source !== source) return;
      if (event.data) {
        // An error event the server sent (a lagging subscriber cut, say);
        // the connection closes and the browser resumes after the last id.
        this.setState(`server: ${event.data}`);
      } else if (source.readyState === EventSource.CLOSED) {
        this.setState("closed by the server (wrong token?)");
      } else {
        this.setState("reconnecting…");
      }
    });
  }

  close() {
    if (this.source) this.source.close();
    this.source = null;
  }

  // Reopens from where the page got to: after a token change, or to resume.
  restart() {
    if (!this.paused && this.next != null) this.start(this.next);
  }

  togglePause() {
    this.paused = !this.paused;
    this.button.textContent = this.paused ? "resume" : "pause";
    if (this.paused) {
      this.close();
      this.setState("paused");
    } else {
      this.start(this.next ?? 0);
    }
  }

  receive(event) {
    let entry;
    try {
      entry = JSON.parse(event.data);
    } catch {
      this.setState("an event that is not an entry was skipped");
      return;
    }
    if (this.next != null && entry.seqnum < this.next) return;
    this.next = entry.seqnum + 1;
    const bytes = decodeBase64(entry.data);
    const row = el(
      "tr",
      { class: "fresh", "data-seqnum": entry.seqnum },
      el("td", { class: "num" }, entry.seqnum),
      el("td", {}, entry.tags.join(", ")),
      el("td", { class: "num" }, entry.stream_version),
      el("td", {}, formatTime(entry.timestamp_ms)),
      el("td", { class: "preview" }, preview(bytes)),
    );
    row.addEventListener("click", () => this.onPick(entry));
    this.body.prepend(row);
    while (this.body.rows.length > MAX_ROWS) this.body.lastElementChild.remove();
  }

  setState(text) {
    this.state.textContent = text;
    this.state.dataset.state = text;
  }
}
