"""Receives Relay's deliveries: checks each signature with Standard Webhooks' library, drops the
duplicates at-least-once delivery brings, and answers 2xx before doing the work.

    pip install standardwebhooks
    RELAY_SIGNING_SECRET=whsec_... PORT=8000 python receiver.py
"""

import json
import os
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["RELAY_SIGNING_SECRET"])
port = int(os.environ.get("PORT", "8000"))
seen = set()  # delivery ids already taken; in production, a unique key in your database
seen_lock = threading.Lock()
work = queue.Queue()


def worker():
    """The work itself, after the answer; here, a line."""
    while True:
        delivery_id, request_id, payload = work.get()
        print(f"verified delivery {delivery_id} of {request_id}: {json.dumps(payload)}")


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        # The raw bytes: verify them before parsing.
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            # Raises unless a signature matches and webhook-timestamp is within 5 minutes of now.
            payload = webhook.verify(body, dict(self.headers))
        except (WebhookVerificationError, ValueError) as error:
            print(f"refused: {error}")
            self.send_response(400)
            self.end_headers()
            return
        # The X-Relay-Delivery-Id, sent again as webhook-id, which the signature covers: the same
        # on every retry of this delivery.
        delivery_id = self.headers["webhook-id"]
        with seen_lock:
            duplicate = delivery_id in seen
            seen.add(delivery_id)
        if duplicate:
            print(f"duplicate delivery {delivery_id}, dropped")
        else:
            work.put((delivery_id, self.headers["X-Relay-Request-Id"], payload))
        self.send_response(204)
        self.end_headers()


threading.Thread(target=worker, daemon=True).start()
print(f"receiver listening on port {port}")
ThreadingHTTPServer(("", port), Receiver).serve_forever()
