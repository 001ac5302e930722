"""Local tool servers that fail the way real APIs do, for Candor's demo traffic.

  /search   a search API: results, a confirmed empty list, or a truncated page (total > items)
  /lookup   a lookup API with rate limits (429 + Retry-After) and 5xx bursts
  /slow     an endpoint that answers after 10 s (longer than any sane timeout)
  /expired  an endpoint whose credential has expired (401)

Stdlib only. Usage: python3 flaky_tools.py PORT
"""

import json
import random
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Tools(BaseHTTPRequestHandler):
    def reply(self, status, body=None, headers=None):
        payload = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller gave up waiting, as /slow means it to

    def do_GET(self):
        path = self.path.split("?")[0]
        roll = random.random()
        if path == "/search":
            if roll < 0.6:
                self.reply(200, {"items": [1, 2, 3], "total": 3})
            elif roll < 0.8:
                self.reply(200, {"items": [], "total": 0})
            else:
                self.reply(200, {"items": [1, 2, 3], "total": 40})
        elif path == "/lookup":
            if roll < 0.5:
                self.reply(200, {"items": [{"id": 7}], "total": 1})
            elif roll < 0.75:
                self.reply(429, {"error": "slow down"}, {"retry-after": "0"})
            else:
                self.reply(503, {"error": "backend unavailable"})
        elif path == "/slow":
            time.sleep(10)
            self.reply(200, {"items": [1], "total": 1})
        elif path == "/expired":
            self.reply(401, {"error": "token expired"})
        else:
            self.reply(404, {"error": "no such tool"})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Tools).serve_forever()
