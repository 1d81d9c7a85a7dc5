# The official Python SDK 2.3.0 client as a stdio benchmark client, the counterpart of purra's bench/src/bin/bench-client.rs.
"""echo calls with distinct texts, every answer checked, one at a time and then K in flight.

Usage: bench_client.py [--calls N] [--concurrency K] -- SERVER COMMAND...
Prints one JSON line; exits 1 on a wrong or missing answer.
"""

import json
import os
import sys
import time

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client


async def main(calls: int, concurrency: int, command: list[str]) -> None:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            await session.initialize()

            async def call(n: int) -> None:
                text = f"hello, purra {n}"
                res = await session.call_tool("echo", {"text": text})
                got = res.content[0].text if res.content and isinstance(res.content[0], types.TextContent) else None
                if res.is_error or got != text:
                    sys.exit(f"bench_client.py: call {n}: wrong answer {res!r}")

            for i in range(500):
                await call(i)
            lat = []
            start = time.perf_counter()
            for i in range(calls):
                t = time.perf_counter()
                await call(i)
                lat.append((time.perf_counter() - t) * 1e6)
            seq = calls / (time.perf_counter() - start)
            lat.sort()
            per = calls // concurrency

            async def worker(k: int) -> None:
                for i in range(per):
                    await call(k * per + i)

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for k in range(concurrency):
                    tg.start_soon(worker, k)
            conc = per * concurrency / (time.perf_counter() - start)
            q = lambda p: round(lat[int((len(lat) - 1) * p)])  # noqa: E731
            print(json.dumps({
                "client": "python-sdk-2.3.0", "calls": calls, "sequential_calls_per_s": round(seq),
                "p50_us": q(0.5), "p99_us": q(0.99), "concurrency": concurrency,
                "concurrent_calls_per_s": round(conc),
            }))  # fmt: skip


if __name__ == "__main__":
    argv = sys.argv[1:]
    sep = argv.index("--")
    opts = dict(zip(argv[:sep:2], argv[1:sep:2]))
    anyio.run(main, int(opts.get("--calls", 20000)), int(opts.get("--concurrency", 16)), argv[sep + 1 :])
