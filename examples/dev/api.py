# A JSON API: who it is and what its environment holds (the token only as a fingerprint).
import hashlib, http.server, json, os


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        token = os.environ.get("API_TOKEN", "")
        body = json.dumps({
            "service": os.environ["K_SERVICE"],
            "greeting": os.environ.get("GREETING"),
            "token_sha256": hashlib.sha256(token.encode()).hexdigest()[:12] if token else None,
        }).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
