// Wires the panels together: polls /v1/status once a second (status,
// chart, and the stream list when the tip moved), runs the live tail, and
// opens entries from the tail, the stream list and the jump forms.

import { api } from "./api.js";
import { ThroughputChart } from "./chart.js";
import { clearError, describeError, showError } from "./dom.js";
import { EntryView } from "./entry.js";
import { renderDisconnected, renderStatus } from "./status.js";
import { loadStreams, renderStreams } from "./streams.js";
import { Tail } from "./tail.js";
import { onTokenChange, setToken, token } from "./token.js";

const POLL_MS = 1000;
// The stream list is reloaded at most this often while appends flow.
const STREAMS_EVERY_POLLS = 2;
// The tail opens this many entries before the tip, so the page is not
// empty on a quiet log.
const TAIL_BACKLOG = 50;

const entryView = new EntryView();
const tail = new Tail((entry) => entryView.show(entry));
const chart = new ThroughputChart(document.getElementById("chart"), document.getElementById("rate"));

let streamsTip = null;
let pollsSinceStreams = 0;

async function openSeqnum(seqnum) {
  try {
    entryView.show(await api.entry(seqnum));
    clearError();
  } catch (err) {
    showError(`entry ${seqnum}: ${describeError(err)}`);
  }
}

async function openVersion(tag, version) {
  try {
    const page = await api.streamEntries(tag, version, 1);
    if (page.entries.length === 0) {
      showError(`stream ${tag} has no entry at version ${version} or after (next version ${page.next_version})`);
      return;
    }
    entryView.show(page.entries[0]);
    clearError();
  } catch (err) {
    showError(`stream ${tag} version ${version}: ${describeError(err)}`);
  }
}

async function refreshStreams(tip) {
  try {
    renderStreams(await loadStreams(), (stream) => {
      document.getElementById("jump-tag-input").value = stream.tag;
      const last = Math.max(0, stream.next_version - 1);
      document.getElementById("jump-version-input").value = last;
      openVersion(stream.tag, last);
    });
    streamsTip = tip;
    pollsSinceStreams = 0;
    clearError("streams");
  } catch (err) {
    showError(`streams: ${describeError(err)}`, "streams");
  }
}

async function poll() {
  try {
    const status = await api.status();
    renderStatus(status);
    chart.sample(performance.now(), status.appends_total);
    if (tail.next == null && !tail.paused) {
      tail.start(Math.max(status.first ?? 0, status.tip - TAIL_BACKLOG));
    }
    pollsSinceStreams++;
    if (streamsTip === null || (status.tip !== streamsTip && pollsSinceStreams >= STREAMS_EVERY_POLLS)) {
      await refreshStreams(status.tip);
    }
    clearError("status");
  } catch (err) {
    renderDisconnected(describeError(err));
    showError(describeError(err), "status");
  }
  setTimeout(poll, POLL_MS);
}

function wireForms() {
  const tokenInput = document.getElementById("token");
  tokenInput.value = token();
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(tokenInput.value.trim());
  });
  onTokenChange(() => {
    clearError();
    streamsTip = null;
    tail.restart();
  });

  document.getElementById("jump-seqnum").addEventListener("submit", (event) => {
    event.preventDefault();
    openSeqnum(document.getElementById("jump-seqnum-input").value.trim());
  });
  document.getElementById("jump-version").addEventListener("submit", (event) => {
    event.preventDefault();
    openVersion(
      document.getElementById("jump-tag-input").value.trim(),
      document.getElementById("jump-version-input").value.trim(),
    );
  });
}

wireForms();
poll();
