"""ContextForge (PyPI `mcp-contextforge-gateway`) in front of an MCP server, for the suite's HTTP-
upstream rows: run with the Python of ContextForge's venv (scripts/setup-peers.sh --bench).

    python bench/contextforge.py --port PORT --upstream URL --dir DIR

Starts ContextForge as its run-gunicorn.sh starts it (gunicorn, uvicorn workers, 2 × CPUs + 1 of
them, preloaded, access log and control socket off), with the settings a loopback benchmark
needs and every other setting at its default (BENCHMARKS.md lists them): a SQLite database in
DIR, JWT authentication on, the admin API on, its rate limiter off (it would refuse most of the
benchmark's calls) and its SSRF guard letting loopback upstreams through (it refuses them by
default). It logs in as the platform administrator, registers URL as a Streamable HTTP gateway
through the admin API, puts the tools it discovered in a virtual server, and prints one JSON
line, {"url": the virtual server's MCP endpoint, "token": a JWT for it} (or {"error": ...}),
then waits until it is killed (the suite kills its process group, gunicorn and its workers with
it).
"""

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

ADMIN = "bench@example.com"


def call(base, method, path, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("content-type", "application/json")
    if token:
        req.add_header("authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


def settings(port, state):
    """Every setting this benchmark gives ContextForge (the rest are its defaults)."""
    return {
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "DATABASE_URL": "sqlite:///" + os.path.join(state, "mcp.db"),
        "AUTH_REQUIRED": "true",
        "JWT_SECRET_KEY": secrets.token_hex(32),
        "AUTH_ENCRYPTION_SECRET": secrets.token_hex(32),
        "PLATFORM_ADMIN_EMAIL": ADMIN,
        "PLATFORM_ADMIN_PASSWORD": "Bench-" + secrets.token_hex(12),
        "ADMIN_REQUIRE_PASSWORD_CHANGE_ON_BOOTSTRAP": "false",
        "MCPGATEWAY_ADMIN_API_ENABLED": "true",
        "MCPGATEWAY_UI_ENABLED": "false",
        "RATE_LIMITING_ENABLED": "false",
        "SSRF_ALLOW_LOCALHOST": "true",
        "LOG_LEVEL": "ERROR",
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    env = dict(os.environ)
    conf = settings(a.port, a.dir)
    env.update(conf)
    workers = min(2 * (os.cpu_count() or 1) + 1, 16)
    # gunicorn as a module of this Python: the venv's `bin/gunicorn` script names in its first
    # line the path the venv was made at, and fails when the venv is reached by another path.
    cmd = [
        sys.executable, "-m", "gunicorn",
        "--worker-class", "uvicorn.workers.UvicornWorker",
        "--workers", str(workers),
        "--timeout", "600",
        "--max-requests", "100000",
        "--max-requests-jitter", "100",
        "--access-logfile", "/dev/null",
        "--error-logfile", os.path.join(a.dir, "gunicorn.log"),
        "--preload",
        "--no-control-socket",
        "--bind", "127.0.0.1:%d" % a.port,
        "mcpgateway.main:app",
    ]
    proc = subprocess.Popen(cmd, env=env, cwd=a.dir, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % a.port
    try:
        deadline = time.time() + 200
        while True:
            if proc.poll() is not None:
                raise RuntimeError("gunicorn ended (%s); see %s/gunicorn.log" % (proc.returncode, a.dir))
            try:
                call(base, "GET", "/health")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.time() > deadline:
                    raise RuntimeError("not answering /health after 200 s")
                time.sleep(0.5)
        login = call(base, "POST", "/auth/email/login",
                     {"email": ADMIN, "password": conf["PLATFORM_ADMIN_PASSWORD"]})
        token = login["access_token"]
        gw = call(base, "POST", "/gateways",
                  {"name": "bench", "url": a.upstream, "transport": "STREAMABLEHTTP"}, token)
        tools = call(base, "GET", "/tools?include_inactive=false", token=token)
        if isinstance(tools, dict):
            tools = tools.get("items") or tools.get("data") or []
        ids = [t["id"] for t in tools if t.get("gatewayId", t.get("gateway_id")) == gw["id"]]
        if not ids:
            raise RuntimeError("no tools discovered from %s: %s" % (a.upstream, tools))
        server = call(base, "POST", "/servers",
                      {"server": {"name": "bench", "associated_tools": ids}}, token)
        print(json.dumps({"url": "%s/servers/%s/mcp" % (base, server["id"]), "token": token,
                          "workers": workers, "tools": len(ids)}), flush=True)
    except Exception as e:  # any failure is the suite's FAILED row, with its reason
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}), flush=True)
        if os.getpgrp() == os.getpid():
            # The group's leader (as the suite starts it): gunicorn's workers go with it.
            os.killpg(os.getpid(), signal.SIGKILL)
        proc.kill()
        sys.exit(1)
    proc.wait()


if __name__ == "__main__":
    main()
