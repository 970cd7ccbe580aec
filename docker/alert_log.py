"""A webhook receiver for the docker stack: prints every Alertmanager/Grafana notification.

One JSON line per alert on stdout (``docker compose logs -f alert-log``): receiver (the URL
path), status, alert name, labels and summary. Standard library only; stands in for a pager or
chat integration. Listens on ``--port`` (default 9095) on every interface of its container.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            payload = json.loads(body)
        except ValueError:
            self.send_error(400, "expected a JSON notification")
            return
        for alert in payload.get("alerts", []):
            print(json.dumps({
                "receiver": self.path.lstrip("/"), "status": alert.get("status"),
                "alertname": alert.get("labels", {}).get("alertname"),
                "labels": alert.get("labels", {}),
                "summary": alert.get("annotations", {}).get("summary"),
            }, sort_keys=True), flush=True)
        self.send_response(200)
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 - the healthcheck
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # one line per alert is printed above; no access log


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=9095)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), _Handler)
    print(f"alert-log listening on {args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
