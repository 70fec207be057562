#!/usr/bin/env python3
"""An Alertmanager webhook receiver that writes what arrives, with its arrival time.

    python3 bench/live/webhook.py 127.0.0.1:9099 pages.jsonl
"""
import http.server
import json
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
out = open(sys.argv[2], "a")


class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        t = time.time()
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {"raw": body.decode("utf-8", "replace")}
        for alert in payload.get("alerts", []):
            out.write(json.dumps({"received": t, "status": alert.get("status"), "labels": alert.get("labels"), "startsAt": alert.get("startsAt")}) + "\n")
        out.flush()
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer((host, int(port)), Hook).serve_forever()
