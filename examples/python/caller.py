"""Calls a Relay endpoint four ways: an async call, a call safe to repeat (Idempotency-Key), a
delayed call (Relay-Delay), and one Relay refuses, to read its error body.

    RELAY_URL=http://localhost:8787/demo/v1/orders RELAY_API_KEY=rk_live_... python caller.py
"""

import json
import os
import urllib.error
import urllib.request

URL = os.environ["RELAY_URL"]
API_KEY = os.environ["RELAY_API_KEY"]


class RelayError(Exception):
    """A call Relay refused: its HTTP status and the {"error": {"code", "message"}} it sent."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code


def relay(body, headers=None):
    """POSTs body as JSON; an async endpoint answers 202 {"status", "requestId"}."""
    request = urllib.request.Request(
        URL,
        method="POST",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {API_KEY}",
            "Content-Type": "application/json",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as refused:
        error = json.load(refused)["error"]
        raise RelayError(refused.code, error["code"], error["message"]) from None


# 1. An async call: queued at once, then delivered to every target, retried until it is.
queued = relay({"order": 1001, "total": 25})
print(f"async call: {queued['status']} {queued['requestId']}")

# 2. With an Idempotency-Key, a repeat (after a timeout, a 503) queues nothing again: it gets
#    the first call's answer, the same requestId.
key = {"Idempotency-Key": "order-1002"}
first = relay({"order": 1002, "total": 40}, key)
repeat = relay({"order": 1002, "total": 40}, key)
print(f"idempotent call: {first['requestId']}, repeated: {repeat['requestId']}")

# 3. A delayed call: scheduled now, delivered in 10 seconds (or at Relay-Not-Before: <RFC 3339>).
scheduled = relay({"order": 1003, "remind": True}, {"Relay-Delay": "10s"})
print(f"delayed call: {scheduled['status']} {scheduled['requestId']}")

# 4. A refusal: more than 7 days ahead is 400 bad_request.
try:
    relay({"order": 1004}, {"Relay-Delay": "8d"})
except RelayError as error:
    print(f"refused: {error.status} {error.code}: {error}")
