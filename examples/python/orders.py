"""An order service's use of a weft server, through weft_client.

    python3 orders.py http://127.0.0.1:7070 [TOKEN]

Places orders with exactly-once ids and conditions on the `orders` stream,
shows a stale condition being refused and a retried append being applied
once, reads the stream back, and subscribes: the backlog, then an entry
appended while it listens. Prints one JSON object per step, so a test
(crates/weft-cli/tests/servers/python_client.rs) can check it against the log.
"""

import base64
import json
import queue
import sys
import threading

from weft_client import WeftClient, WeftError

# How long the live step waits for its entry before failing loudly (a stuck
# subscription must end the script, not hang it).
LIVE_WAIT_S = 30


def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def next_version(log, tag):
    try:
        return log.stream(tag)["next_version"]
    except WeftError as e:
        if e.kind == "not_found":
            return 0
        raise


def order(order_id, event, **details):
    return json.dumps({"order": order_id, "event": event, **details}).encode()


def main():
    log = WeftClient(sys.argv[1], token=sys.argv[2] if len(sys.argv) > 2 else None)
    status = log.status()
    say("status", backend=status["backend"], role=status["role"], tip=status["tip"])

    # Place o-1 only if nobody wrote to `orders` since we looked.
    seen = next_version(log, "orders")
    placed = log.append([(["orders", "orders:o-1"], order("o-1", "placed", total=42))],
                        id="o-1/placed", expect=("orders", seen))
    say("append", id="o-1/placed", seqnum=placed.seqnum, stream_version=placed.stream_version)

    # The same append again (as after a lost answer): the id makes it a no-op
    # that answers with the original position.
    again = log.append([(["orders", "orders:o-1"], order("o-1", "placed", total=42))],
                       id="o-1/placed", expect=("orders", seen))
    say("retry", id="o-1/placed", seqnum=again.seqnum, stream_version=again.stream_version)

    # A writer that still believes `orders` is at `seen` is refused.
    try:
        log.append([(["orders", "orders:o-9"], order("o-9", "placed", stale=True))],
                   expect=("orders", seen))
        say("conflict", kind=None)
    except WeftError as e:
        say("conflict", kind=e.kind, status=e.status)

    # Two events of o-2 as one atomic batch, conditional on the fresh version.
    # Each entry carries its own id.
    batch = log.append([(["orders", "orders:o-2"], order("o-2", "placed", total=7), "o-2/placed"),
                        (["orders", "orders:o-2"], order("o-2", "paid"), "o-2/paid")],
                       expect=("orders", next_version(log, "orders")))
    say("batch", ids=["o-2/placed", "o-2/paid"], seqnum=batch.seqnum, count=batch.count)

    entries, nxt = log.read_stream("orders", 0, 100)
    say("read_stream", tag="orders", versions=[e.stream_version for e in entries],
        seqnums=[e.seqnum for e in entries], next_version=nxt)

    first = log.entry(placed.seqnum)
    say("entry", seqnum=first.seqnum, tags=list(first.tags), data=first.data.decode(),
        id=first.append_id)

    # Subscribe from the first order: the backlog arrives, then o-3, which is
    # appended only once the subscriber has caught up.
    got = queue.Queue()
    caught_up = threading.Event()
    tip = log.status()["tip"]

    def listen():
        try:
            for entry in log.subscribe(from_seqnum=placed.seqnum):
                got.put(entry)
                if entry.seqnum + 1 >= tip:
                    caught_up.set()
        except WeftError as e:
            got.put(e)

    threading.Thread(target=listen, daemon=True).start()
    if not caught_up.wait(LIVE_WAIT_S):
        raise SystemExit("the subscription never delivered the backlog")
    live = log.append([(["orders", "orders:o-3"], order("o-3", "placed", total=1))], id="o-3/placed")
    delivered = []
    while not delivered or delivered[-1] < live.seqnum:
        item = got.get(timeout=LIVE_WAIT_S)
        if isinstance(item, WeftError):
            raise item
        delivered.append(item.seqnum)
    say("subscribe", from_seqnum=placed.seqnum, seqnums=delivered, live_seqnum=live.seqnum)

    # Everything, as a check against the log itself.
    say("entries", entries=[
        {"seqnum": e.seqnum, "stream_version": e.stream_version, "tags": list(e.tags),
         "timestamp_ms": e.timestamp_ms, "id": e.append_id,
         "data": base64.b64encode(e.data).decode()}
        for e in log.read_all(0)
    ])
    say("done")


if __name__ == "__main__":
    main()
