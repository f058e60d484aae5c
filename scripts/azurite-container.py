#!/usr/bin/env python3
"""Creates a blob container with one Shared Key signed REST request.

    azurite-container.py ACCOUNT_URL CONTAINER

ACCOUNT_URL is the account's blob endpoint, path-style for Azurite
(http://127.0.0.1:PORT/ACCOUNT). The account name and key come from
AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY.

object_store has no call that creates a container, so scripts/azurite.sh
uses this once after start-up. Exit status: 0 when the container was created
or already exists (201 or 409 ContainerAlreadyExists), 1 on any other answer,
2 when the server did not answer. Standard library only.
"""

import base64
import email.utils
import hashlib
import hmac
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

# The REST version the request is signed for; Azurite 3.37 accepts it.
API_VERSION = "2021-12-02"

# The headers whose values (empty when absent) open the string to sign, in
# this order. x-ms-date stands in for Date, which stays empty.
STANDARD_HEADERS = [
    "Content-Encoding",
    "Content-Language",
    "Content-Length",
    "Content-MD5",
    "Content-Type",
    "Date",
    "If-Modified-Since",
    "If-Match",
    "If-None-Match",
    "If-Unmodified-Since",
    "Range",
]


def sign(account, key_b64, method, path, query, headers):
    """The Shared Key signature of a request with no body."""
    canonical_headers = "".join(
        f"{name}:{value}\n"
        for name, value in sorted(
            (k.lower(), v.strip()) for k, v in headers.items() if k.lower().startswith("x-ms-")
        )
    )
    # Path-style URLs (the emulator's) carry the account in the path as
    # well, so it appears twice in the canonical resource.
    resource = f"/{account}{path}" + "".join(
        f"\n{k.lower()}:{v}" for k, v in sorted(query.items())
    )
    standard = [headers.get(name, "") for name in STANDARD_HEADERS]
    # A zero Content-Length is signed as empty since REST version 2015-02-21.
    if standard[2] == "0":
        standard[2] = ""
    string_to_sign = "\n".join([method, *standard]) + "\n" + canonical_headers + resource
    mac = hmac.new(base64.b64decode(key_b64), string_to_sign.encode("utf-8"), hashlib.sha256)
    return f"SharedKey {account}:{base64.b64encode(mac.digest()).decode('ascii')}"


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 1
    account_url, container = argv[1].rstrip("/"), argv[2]
    account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME", "")
    key = os.environ.get("AZURE_STORAGE_ACCOUNT_KEY", "")
    if not account or not key:
        print("AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY must be set", file=sys.stderr)
        return 1

    url = f"{account_url}/{container}?restype=container"
    path = urllib.parse.urlsplit(url).path
    headers = {
        "x-ms-date": email.utils.formatdate(usegmt=True),
        "x-ms-version": API_VERSION,
        # Set explicitly (urllib would add its own for a request with a
        # body), so the signed values are exactly the sent ones.
        "Content-Length": "0",
        "Content-Type": "application/octet-stream",
    }
    headers["Authorization"] = sign(account, key, "PUT", path, {"restype": "container"}, headers)
    request = urllib.request.Request(url, data=b"", method="PUT", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        print(f"no answer from {account_url}: {e}", file=sys.stderr)
        return 2
    if status == 201:
        print(f"created container {container}")
        return 0
    if status == 409 and b"ContainerAlreadyExists" in body:
        print(f"container {container} already exists")
        return 0
    print(f"creating container {container} failed: HTTP {status}: {body[:500]!r}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
