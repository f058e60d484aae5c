"""A small client for `weft serve`, standard library only.

Appends (one entry or an atomic batch, with exactly-once ids and a
condition on a stream's version), reads (by seqnum, by stream and version,
paged), stream listings, status, and subscriptions over Server-Sent Events
that resume after a dropped connection without a gap or a duplicate.

Payloads travel base64-encoded in JSON; this module takes and returns
`bytes`. Every non-2xx answer raises `WeftError` with the error kind the
server named (`conflict`, `not_found`, `unavailable`, ...).

    from weft_client import WeftClient
    log = WeftClient("http://127.0.0.1:7070")
    ack = log.append([(["orders", "orders:o-1"], b'{"placed": 1}')], id="o-1/placed")
    log.append([(["orders", "orders:o-2"], b'{"placed": 2}', "o-2/placed"),
                (["orders", "orders:o-2"], b'{"paid": 2}', "o-2/paid")])
    for entry in log.subscribe(from_seqnum=0):
        print(entry.seqnum, entry.tags, entry.data)
"""

from __future__ import annotations

import base64
import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional, Sequence, Tuple

# Kinds after which the same request may simply be sent again: the server
# did not write (unavailable) or may have written (indeterminate), and an
# append carrying an id is applied at most once either way.
RETRYABLE_KINDS = frozenset({"unavailable", "indeterminate"})


class WeftError(Exception):
    """A request the server refused or that did not complete."""

    def __init__(self, kind: str, message: str, status: int = 0,
                 retry_after_ms: Optional[int] = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after_ms = retry_after_ms


@dataclass(frozen=True)
class Entry:
    seqnum: int
    stream_version: int
    tags: Tuple[str, ...]
    data: bytes
    timestamp_ms: int
    append_id: Optional[str] = None  # the id it was appended with, if any

    @staticmethod
    def from_json(obj: dict) -> "Entry":
        return Entry(
            seqnum=obj["seqnum"],
            stream_version=obj["stream_version"],
            tags=tuple(obj["tags"]),
            data=base64.b64decode(obj["data"]),
            timestamp_ms=obj["timestamp_ms"],
            append_id=obj.get("id"),
        )


@dataclass(frozen=True)
class Appended:
    seqnum: int  # the first entry's seqnum
    stream_version: int
    timestamp_ms: int
    count: int


class WeftClient:
    """One server, reached at `base_url` (`http://host:port`)."""

    def __init__(self, base_url: str, token: Optional[str] = None,
                 timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- plumbing ---------------------------------------------------------

    def _headers(self) -> dict:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _request(self, method: str, path: str, body: Optional[dict] = None) -> dict:
        data = None
        headers = self._headers()
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base_url + path, data=data,
                                     headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise _error_from(e.code, e.read()) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError,
                http.client.HTTPException) as e:
            # No answer: for a read nothing happened; for an append the
            # server may or may not have written it.
            kind = "indeterminate" if method == "POST" else "unavailable"
            raise WeftError(kind, f"no answer from the server: {e}") from None

    # -- appends ----------------------------------------------------------

    def append(self, entries: Iterable[tuple], *,
               id: Optional[str] = None,
               expect: Optional[Tuple[str, int]] = None,
               retries: int = 5) -> Appended:
        """Appends `entries` as one atomic batch.

        Each entry is `(tags, payload)` or `(tags, payload, id)`: an entry
        with an id is applied exactly once, however often it is sent. `id`
        is the same for a single-entry append. `expect=(tag, next_version)`
        appends only if that stream's next version is still `next_version`
        (else `WeftError` kind `conflict`).

        An append that failed retryably is sent again when every entry has
        an id (the server skips what it already wrote); without ids it is
        never retried, as it might be written twice.
        """
        entries = list(entries)
        if id is not None and len(entries) != 1:
            raise ValueError("`id` names a single-entry append; give a batch's entries their own ids")
        body_entries = []
        for item in entries:
            tags, payload = item[0], item[1]
            entry = {"tags": list(tags), "data": base64.b64encode(payload).decode()}
            if len(item) > 2 and item[2] is not None:
                entry["id"] = item[2]
            body_entries.append(entry)
        body = {
            "entries": body_entries,
            "condition": None if expect is None
            else {"tag": expect[0], "next_version": expect[1]},
            "id": id,
        }
        idempotent = id is not None or all("id" in e for e in body_entries)
        attempt = 0
        while True:
            try:
                ack = self._request("POST", "/v1/append", body)
                return Appended(ack["seqnum"], ack["stream_version"],
                                ack["timestamp_ms"], ack["count"])
            except WeftError as e:
                attempt += 1
                if not idempotent or e.kind not in RETRYABLE_KINDS or attempt > retries:
                    raise
                time.sleep((e.retry_after_ms or 100 * attempt) / 1000)

    # -- reads ------------------------------------------------------------

    def status(self) -> dict:
        return self._request("GET", "/v1/status")

    def entry(self, seqnum: int) -> Entry:
        return Entry.from_json(self._request("GET", f"/v1/entries/{seqnum}"))

    def read(self, from_seqnum: int = 0, limit: int = 100) -> Tuple[list, int]:
        """One page of entries from `from_seqnum`, and the seqnum to ask next."""
        page = self._request("GET", f"/v1/entries?from={from_seqnum}&limit={limit}")
        return [Entry.from_json(e) for e in page["entries"]], page["next"]

    def read_all(self, from_seqnum: int = 0, page: int = 100) -> Iterator[Entry]:
        """Every entry from `from_seqnum` up to the tip, page by page."""
        while True:
            entries, nxt = self.read(from_seqnum, page)
            yield from entries
            if not entries:
                return
            from_seqnum = nxt

    def stream(self, tag: str) -> dict:
        """`{"tag", "next_version", "entries"}` of one stream."""
        return self._request("GET", f"/v1/streams/{_q(tag)}")

    def read_stream(self, tag: str, from_version: int = 0,
                    limit: int = 100) -> Tuple[list, int]:
        page = self._request(
            "GET", f"/v1/streams/{_q(tag)}/entries?from_version={from_version}&limit={limit}")
        return [Entry.from_json(e) for e in page["entries"]], page["next_version"]

    def streams(self, after: Optional[str] = None, limit: int = 100) -> Tuple[list, Optional[str]]:
        query = f"limit={limit}" + ("" if after is None else f"&after={_q(after)}")
        page = self._request("GET", f"/v1/streams?{query}")
        return page["streams"], page["next"]

    # -- subscriptions ----------------------------------------------------

    def subscribe(self, from_seqnum: int = 0, reconnects: int = 5) -> Iterator[Entry]:
        """Entries from `from_seqnum` on: the backlog, then live, forever.

        A dropped connection is reopened with `Last-Event-ID` set to the
        last seqnum received, so the iteration has no gap and no duplicate.
        `reconnects` bounds consecutive failed reconnections.
        """
        last_id: Optional[int] = None
        failures = 0
        while True:
            try:
                for entry in self._sse(from_seqnum, last_id):
                    failures = 0
                    last_id = entry.seqnum
                    yield entry
                raise ConnectionError("the server ended the stream")
            except (ConnectionError, TimeoutError, http.client.HTTPException, OSError) as e:
                failures += 1
                if failures > reconnects:
                    raise WeftError("unavailable", f"subscription lost: {e}") from None
                time.sleep(0.1 * failures)

    def _sse(self, from_seqnum: int, last_id: Optional[int]) -> Iterator[Entry]:
        url = urllib.parse.urlsplit(self.base_url)
        conn_type = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        conn = conn_type(url.hostname, url.port, timeout=self.timeout)
        headers = self._headers()
        headers["Accept"] = "text/event-stream"
        if last_id is not None:
            headers["Last-Event-ID"] = str(last_id)
        try:
            conn.request("GET", f"{url.path}/v1/subscribe?from={from_seqnum}", headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                raise _error_from(resp.status, resp.read())
            for event, data in _sse_events(resp):
                if event == "entry":
                    yield Entry.from_json(json.loads(data))
                elif event == "error":
                    # The server cut this subscription (a lagging reader,
                    # say); resuming from the last id is what it asks for.
                    raise ConnectionError(f"server: {data}")
        finally:
            conn.close()


def _sse_events(resp) -> Iterator[Tuple[str, str]]:
    """(event, data) pairs from a text/event-stream body."""
    event, data = "message", []
    while True:
        raw = resp.readline()
        if not raw:
            return
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue  # a keep-alive comment
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)


def _error_from(status: int, body: bytes) -> WeftError:
    try:
        err = json.loads(body)["error"]
        return WeftError(err["kind"], err.get("message", ""), status, err.get("retry_after_ms"))
    except (ValueError, KeyError, TypeError):
        return WeftError(f"http_{status}", body[:200].decode("utf-8", "replace"), status)


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")
