# An OTLP/HTTP receiver for purra's telemetry tests, decoding with the official opentelemetry-proto package.
"""Receives OTLP/HTTP protobuf exports and writes what they carry as JSON lines.

Usage: otlp_receiver.py --out FILE

Listens on 127.0.0.1 on a free port and prints `listening http://127.0.0.1:PORT` on stdout. Accepts
POST /v1/traces (ExportTraceServiceRequest) and POST /v1/metrics (ExportMetricsServiceRequest),
answers each with the empty protobuf response, and appends to FILE, flushed at once, one JSON
object per span:

  {"signal": "span", "service": S, "scope": NAME, "name": N, "trace_id": HEX, "span_id": HEX,
   "parent_span_id": HEX or "", "kind": "SPAN_KIND_SERVER", "status": "STATUS_CODE_ERROR" or ...,
   "attributes": {KEY: VALUE}}

and one per metric data point:

  {"signal": "metric", "service": S, "name": N, "type": "sum"|"gauge"|"histogram",
   "attributes": {KEY: VALUE}, "value": V} (histograms: "count", "sum", "bucket_counts", "bounds")

Anything else is answered 404; a body that does not decode is answered 400 and logged on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

LOCK = threading.Lock()
OUT = ""
MAX_BODY = 16 * 1024 * 1024


def value_of(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    v = getattr(any_value, kind)
    if kind == "array_value":
        return [value_of(x) for x in v.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.values}
    if kind == "bytes_value":
        return v.hex()
    return v


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in kvs}


def write(docs: list[dict[str, Any]]) -> None:
    with LOCK, open(OUT, "a", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, sort_keys=True) + "\n")
        f.flush()


def spans(body: bytes) -> list[dict[str, Any]]:
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    out = []
    for rs in req.resource_spans:
        service = attributes(rs.resource.attributes).get("service.name", "")
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    {
                        "signal": "span",
                        "service": service,
                        "scope": ss.scope.name,
                        "name": s.name,
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "kind": Span.SpanKind.Name(s.kind),
                        "status": Status.StatusCode.Name(s.status.code),
                        "attributes": attributes(s.attributes),
                    }
                )
    return out


def metrics(body: bytes) -> list[dict[str, Any]]:
    req = ExportMetricsServiceRequest()
    req.ParseFromString(body)
    out = []
    for rm in req.resource_metrics:
        service = attributes(rm.resource.attributes).get("service.name", "")
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                data = getattr(m, kind)
                for p in data.data_points:
                    doc: dict[str, Any] = {
                        "signal": "metric",
                        "service": service,
                        "name": m.name,
                        "type": kind,
                        "attributes": attributes(p.attributes),
                    }
                    if kind == "histogram":
                        doc.update(count=p.count, sum=p.sum, bucket_counts=list(p.bucket_counts), bounds=list(p.explicit_bounds))
                    else:
                        doc["value"] = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                    out.append(doc)
    return out


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_error(413)
            return
        body = self.rfile.read(length)
        try:
            if self.path == "/v1/traces":
                write(spans(body))
                answer = ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                write(metrics(body))
                answer = ExportMetricsServiceResponse().SerializeToString()
            else:
                self.send_error(404)
                return
        except Exception as err:  # noqa: BLE001 - reported, answered 400
            print(f"otlp_receiver: cannot decode {self.path}: {err!r}", file=sys.stderr, flush=True)
            self.send_error(400)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the http.server API
        pass


def main() -> None:
    global OUT
    parser = argparse.ArgumentParser(description="OTLP/HTTP receiver (opentelemetry-proto)")
    parser.add_argument("--out", required=True)
    opts = parser.parse_args()
    OUT = opts.out
    open(OUT, "a", encoding="utf-8").close()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
