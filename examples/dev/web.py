# Calls api by its service name with the ordinary HTTP client: the gateway gave this process http_proxy.
import http.server, os, subprocess, urllib.request


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/curl":  # any client that reads http_proxy works the same
            answer = subprocess.run(["curl", "-sS", "--max-time", "30", "http://api/"],
                                    capture_output=True, check=True).stdout
        else:
            answer = urllib.request.urlopen("http://api/", timeout=30).read()
        body = b"web called api: " + answer
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
