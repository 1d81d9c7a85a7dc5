# Webhook receiver for purra's webhook tests: verifies each request with the Standard Webhooks
# reference library (PyPI `standardwebhooks`, in its own venv .peers/venv-webhooks) and records it.
"""Webhook receiver `webhook-receiver-python`.

Usage: webhook_receiver.py --ledger FILE [--port PORT] [--secret-file FILE]

Listens on 127.0.0.1:PORT (0: any free port) and prints one JSON line `{"port": N}` on stdout once
it listens. Every POST is read (at most 1 MiB), verified with `standardwebhooks.Webhook(secret)
.verify(body, headers)` when a secret is given, and recorded as one JSON line appended to the
ledger, flushed and fsynced before the answer is sent:

  {"path", "query", "id", "timestamp", "signed", "verified", "error", "body", "status"}

`verified` is true or false (with the library's `error`), or null without a secret or without a
`webhook-signature` header (a Slack-format endpoint without a secret); `body` is the parsed JSON
(or the raw text). The answer is chosen by the request's query:

  status=N       answer N (default 204)
  fail_first=N   answer 503 to the first N requests on its path carrying each webhook-id, then
                 the default
  delay_ms=N     wait N ms before answering (a slow receiver)

A request that fails verification is answered 400 (and recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

MAX_BODY = 1 << 20
LEDGER = ""
SECRET: str | None = None
LOCK = threading.Lock()
SEEN: dict[str, int] = {}


def record(entry: dict) -> None:
    with LOCK:
        with open(LEDGER, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            self.answer(413)
            return
        raw = self.rfile.read(length)
        text = raw.decode("utf-8", errors="replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        msg_id = headers.get("webhook-id")
        verified = None
        error = None
        if SECRET is not None and "webhook-signature" in headers:
            try:
                Webhook(SECRET).verify(text, headers)
                verified = True
            except WebhookVerificationError as e:
                verified = False
                error = str(e)
        try:
            body = json.loads(text)
        except ValueError:
            body = text
        status = int(query.get("status", "204"))
        with LOCK:
            seen = f"{url.path} {msg_id}"
            SEEN[seen] = SEEN.get(seen, 0) + 1
            nth = SEEN[seen]
        if nth <= int(query.get("fail_first", "0")):
            status = 503
        if verified is False:
            status = 400
        record(
            {
                "path": url.path,
                "query": query,
                "id": msg_id,
                "timestamp": headers.get("webhook-timestamp"),
                "signed": "webhook-signature" in headers,
                "verified": verified,
                "error": error,
                "body": body,
                "status": status,
            }
        )
        delay = int(query.get("delay_ms", "0"))
        if delay:
            time.sleep(delay / 1000)
        self.answer(status)

    def answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()


def main() -> None:
    global LEDGER, SECRET
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--secret-file")
    args = parser.parse_args()
    LEDGER = args.ledger
    if args.secret_file:
        with open(args.secret_file, encoding="utf-8") as f:
            SECRET = f.read().strip()
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    # Ends when the test closes its stdin (or kills it).
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
