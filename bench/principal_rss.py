"""Memory of one per-principal stdio upstream process (issue 45): starts the Python SDK stdio server
the identity tests use (peers/python/token_env_server.py) three times, each with its own token in its
environment, makes one call, and prints its VmRSS and RssAnon. Run from the repository root after
scripts/setup-peers.sh: python3 bench/principal_rss.py"""
import subprocess, json, time, sys, os
py = ".peers/venv/bin/python"
vals=[]
for i in range(3):
    p = subprocess.Popen([py, "peers/python/token_env_server.py"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "PURRA_TEST_TOKEN": f"tok{i}"})
    def send(m):
        p.stdin.write((json.dumps(m)+"\n").encode()); p.stdin.flush()
    send({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"m","version":"1"}}})
    p.stdout.readline()
    send({"jsonrpc":"2.0","method":"notifications/initialized"})
    send({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}})
    p.stdout.readline()
    time.sleep(0.3)
    rss=[l for l in open(f"/proc/{p.pid}/status") if l.startswith(("VmRSS","RssAnon"))]
    vals.append(rss)
    p.terminate(); p.wait()
for v in vals: print([x.strip() for x in v])
