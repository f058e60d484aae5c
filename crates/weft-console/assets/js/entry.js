// One entry's view: its seqnum, version, tags, time and id, and the
// payload as text, JSON or hex.

import { setField } from "./dom.js";
import { bestFormat, decodeBase64, formatSize, formatTime, render } from "./payload.js";

export class EntryView {
  constructor() {
    this.box = document.getElementById("entry");
    this.empty = document.getElementById("entry-empty");
    this.payload = document.getElementById("payload");
    this.bytes = null;
    for (const radio of this.box.querySelectorAll('input[name="format"]')) {
      radio.addEventListener("change", () => this.draw(radio.value));
    }
  }

  show(entry) {
    this.bytes = decodeBase64(entry.data);
    this.box.dataset.seqnum = entry.seqnum;
    setField(this.box, "seqnum", entry.seqnum);
    setField(this.box, "stream_version", `${entry.stream_version} in ${entry.tags[0] ?? "–"}`);
    setField(this.box, "tags", entry.tags.join(", "));
    setField(this.box, "time", formatTime(entry.timestamp_ms));
    // The append id, null for an entry appended without one.
    setField(this.box, "id", entry.id ?? "–");
    setField(this.box, "size", formatSize(this.bytes.length));
    const format = bestFormat(this.bytes);
    this.box.querySelector(`input[name="format"][value="${format}"]`).checked = true;
    this.draw(format);
    this.box.hidden = false;
    this.empty.hidden = true;
    for (const row of document.querySelectorAll("#tail tr.selected")) row.classList.remove("selected");
    const row = document.querySelector(`#tail tr[data-seqnum="${entry.seqnum}"]`);
    if (row) row.classList.add("selected");
  }

  draw(format) {
    if (!this.bytes) return;
    const { text, invalid } = render(this.bytes, format);
    this.payload.textContent = text;
    this.payload.classList.toggle("invalid", invalid);
    this.payload.dataset.format = format;
  }
}
