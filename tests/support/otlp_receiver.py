#!/usr/bin/python3
"""A test collector: receives OTLP traces and metrics over HTTP (protobuf) and gRPC, and Zipkin v2 JSON,
decodes each request with classes protoc makes from sluice's OTLP .proto files, and prints one JSON line per
request on stdout ({"signal": "traces"|"metrics"|"zipkin", "transport": ..., ...}). The first line says
where it listens. --http-status / --grpc-status / --delay make it a failing or slow collector; --tls-cert and
--tls-key put both listeners behind TLS (ALPN http/1.1 and h2) with that certificate.

Run with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf)."""
import argparse
import concurrent.futures
import importlib
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc


def compile_protos(proto_dir):
    out = tempfile.mkdtemp(prefix="otlp-py-")
    protos = [os.path.relpath(os.path.join(d, f), proto_dir)
              for d, _, files in os.walk(proto_dir) for f in files if f.endswith(".proto")]
    subprocess.run(["protoc", "-I", proto_dir, "--python_out", out] + protos, check=True)
    sys.path.insert(0, out)
    return (importlib.import_module("opentelemetry.proto.collector.trace.v1.trace_service_pb2"),
            importlib.import_module("opentelemetry.proto.collector.metrics.v1.metrics_service_pb2"))


def attributes(kvs):
    out = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


def traces_json(req):
    batches = []
    for rs in req.resource_spans:
        spans = []
        for ss in rs.scope_spans:
            for s in ss.spans:
                spans.append({"trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                              "parent_span_id": s.parent_span_id.hex(), "name": s.name, "kind": s.kind,
                              "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                              "flags": s.flags, "trace_state": s.trace_state,
                              "status": s.status.code, "scope": ss.scope.name,
                              "attributes": attributes(s.attributes)})
        batches.append({"resource": attributes(rs.resource.attributes), "spans": spans})
    return batches


def metrics_json(req):
    out = []
    for rm in req.resource_metrics:
        metrics = []
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                which = m.WhichOneof("data")
                entry = {"name": m.name, "unit": m.unit, "type": which, "points": []}
                data = getattr(m, which)
                if which in ("sum", "histogram"):
                    entry["temporality"] = data.aggregation_temporality
                for p in data.data_points:
                    point = {"attributes": attributes(p.attributes), "start": p.start_time_unix_nano,
                             "time": p.time_unix_nano}
                    if which == "histogram":
                        point.update({"count": p.count, "sum": p.sum, "bounds": list(p.explicit_bounds),
                                      "buckets": list(p.bucket_counts)})
                    else:
                        point["value"] = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
                    entry["points"].append(point)
                metrics.append(entry)
        out.append({"resource": attributes(rm.resource.attributes), "metrics": metrics})
    return out


lock = threading.Lock()


def emit(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--http-status", type=int, default=200)
    ap.add_argument("--grpc-status", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to wait before answering")
    ap.add_argument("--tls-cert", help="PEM certificate (chain) to serve; with --tls-key, both listeners speak TLS")
    ap.add_argument("--tls-key", help="PEM private key of --tls-cert")
    args = ap.parse_args()
    trace_pb, metrics_pb = compile_protos(args.proto_dir)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ctype = self.headers.get("Content-Type", "")
            if self.path == "/v1/traces":
                req = trace_pb.ExportTraceServiceRequest.FromString(body)
                emit({"signal": "traces", "transport": "http", "content_type": ctype, "batches": traces_json(req)})
                reply = trace_pb.ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                req = metrics_pb.ExportMetricsServiceRequest.FromString(body)
                emit({"signal": "metrics", "transport": "http", "content_type": ctype, "batches": metrics_json(req)})
                reply = metrics_pb.ExportMetricsServiceResponse().SerializeToString()
            elif self.path == "/api/v2/spans":
                emit({"signal": "zipkin", "transport": "http", "content_type": ctype, "spans": json.loads(body)})
                reply = b""
            else:
                emit({"signal": "unknown", "path": self.path})
                reply = b""
            time.sleep(args.delay)
            self.send_response(args.http_status if self.path != "/api/v2/spans" or args.http_status != 200 else 202)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    http_server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if args.tls_cert:
        # The handshake runs in the accepting thread; one that fails (a client refusing the certificate)
        # raises an OSError there, which socketserver drops with the connection.
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
        tls.set_alpn_protocols(["http/1.1"])
        http_server.socket = tls.wrap_socket(http_server.socket, server_side=True)
    threading.Thread(target=http_server.serve_forever, daemon=True).start()

    def unary(signal, decode, reply):
        def handle(req, context):
            emit({"signal": signal, "transport": "grpc", "batches": decode(req)})
            time.sleep(args.delay)
            if args.grpc_status != 0:
                context.abort(grpc.StatusCode(list(grpc.StatusCode)[args.grpc_status].value), "refused by test")
            return reply
        return handle

    handlers = [
        grpc.method_handlers_generic_handler("opentelemetry.proto.collector.trace.v1.TraceService", {
            "Export": grpc.unary_unary_rpc_method_handler(
                unary("traces", traces_json, trace_pb.ExportTraceServiceResponse()),
                request_deserializer=trace_pb.ExportTraceServiceRequest.FromString,
                response_serializer=trace_pb.ExportTraceServiceResponse.SerializeToString)}),
        grpc.method_handlers_generic_handler("opentelemetry.proto.collector.metrics.v1.MetricsService", {
            "Export": grpc.unary_unary_rpc_method_handler(
                unary("metrics", metrics_json, metrics_pb.ExportMetricsServiceResponse()),
                request_deserializer=metrics_pb.ExportMetricsServiceRequest.FromString,
                response_serializer=metrics_pb.ExportMetricsServiceResponse.SerializeToString)}),
    ]
    grpc_server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4), handlers=handlers)
    if args.tls_cert:
        with open(args.tls_key, "rb") as k, open(args.tls_cert, "rb") as c:
            credentials = grpc.ssl_server_credentials([(k.read(), c.read())])
        grpc_port = grpc_server.add_secure_port("127.0.0.1:0", credentials)
    else:
        grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    emit({"listening": True, "http_port": http_server.server_address[1], "grpc_port": grpc_port,
          "tls": bool(args.tls_cert)})
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
