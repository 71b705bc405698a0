#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An HTTP server for tests/net: answers every GET with the current time, in nanoseconds
(or with the text given by --body). It prints its port on its first line once it listens.

Usage: time-server.py [--port N] [--body TEXT] [--count FILE]
"""
import argparse
import http.server
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--body")
ap.add_argument("--count", help="a file where the number of requests served is kept")
opt = ap.parse_args()
served = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        global served
        body = (opt.body if opt.body is not None else "time %d\n" % time.time_ns()).encode()
        # counted before the answer: a client holding the body finds the count written
        served += 1
        if opt.count:
            with open(opt.count, "w") as f:
                f.write("%d\n" % served)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.HTTPServer):
    allow_reuse_address = True


srv = Server(("127.0.0.1", opt.port), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
