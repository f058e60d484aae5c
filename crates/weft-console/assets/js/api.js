// The server's HTTP API, as the console uses it. Every call sends the
// bearer token when one is set; every non-2xx answer becomes an ApiError
// carrying the error kind the server named.

import { token } from "./token.js";

export class ApiError extends Error {
  constructor(status, kind, message, retryAfterMs) {
    super(message);
    this.status = status;
    this.kind = kind;
    this.retryAfterMs = retryAfterMs;
  }
}

async function getJson(path) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  let response;
  try {
    response = await fetch(path, { headers, cache: "no-store" });
  } catch (e) {
    // fetch rejects only when no answer came (server down, network gone).
    throw new ApiError(0, "unavailable", `no answer from the server: ${e.message}`, null);
  }
  if (response.ok) return response.json();
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not the server's JSON error body (a proxy's page, say): keep the status.
  }
  const err = body && body.error;
  throw new ApiError(
    response.status,
    err && err.kind ? err.kind : `http_${response.status}`,
    err && err.message ? err.message : response.statusText,
    err ? err.retry_after_ms ?? null : null,
  );
}

const q = encodeURIComponent;

export const api = {
  status: () => getJson("/v1/status"),
  streams: (after, limit) =>
    getJson(`/v1/streams?limit=${limit}${after == null ? "" : `&after=${q(after)}`}`),
  stream: (tag) => getJson(`/v1/streams/${q(tag)}`),
  entry: (seqnum) => getJson(`/v1/entries/${q(seqnum)}`),
  streamEntries: (tag, fromVersion, limit) =>
    getJson(`/v1/streams/${q(tag)}/entries?from_version=${q(fromVersion)}&limit=${limit}`),
  // EventSource cannot send headers, so the token travels as a query
  // parameter on this one route.
  subscribeUrl: (from) => {
    const t = token();
    return `/v1/subscribe?from=${q(from)}${t ? `&access_token=${q(t)}` : ""}`;
  },
};
