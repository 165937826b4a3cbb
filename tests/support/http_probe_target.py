#!/usr/bin/python3
"""An app for HTTP readiness probe tests: answers every GET with --status (200) and an empty body, over
HTTPS when given --cert and --key, and prints each request as one JSON line:
{"path": ..., "headers": [[name, value], ...]} in the order they came. The first line is "listening PORT"
(a free port on 127.0.0.1)."""
import argparse
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--status", type=int, default=200)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            print(json.dumps({"path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}),
                  flush=True)
            self.send_response(args.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print("listening %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
