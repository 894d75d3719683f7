"""Instances on one database: writes and reads a second with one instance of the service
and with two, each ``ratings serve`` with its own workers, on one PostgreSQL database.

    .venv/bin/python benchmarks/instances.py [--instances 1,2] [--workers 2]
        [--connections 32] [--seconds 10] [--postgres postgresql://postgres@127.0.0.1:5432]
        [--format table|markdown]

For each instance count, on a new database: a ladder of 10,000 players, then single 1 v 1
POSTs between players drawn uniformly from them, then reads of a player with its rank,
each for ``--seconds``. With wrk installed each instance gets its own wrk (two threads,
``--connections`` split evenly between the instances), as a load balancer would spread
the same clients; the rates are summed. The instances share the machine's cores with
PostgreSQL and the load generators, so on one machine this measures what a second
instance costs, not what a second machine would bring.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

# ``benchmarks/http.py`` shares its name with the standard library's package: this folder
# must not shadow it on the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
ROOT = _HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.databases import http_benchmark, print_table  # noqa: E402

bench = http_benchmark()

PLAYERS = 10_000


def _bodies(count: int, prefix: str, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "match_id": f"{prefix}-{n}",
            "teams": [[f"p{a}"] for a in rng.sample(range(PLAYERS), 2)],
            "ranks": [1, 2],
        }
        for n in range(count)
    ]


def _drive(
    servers: list[Any], key: str, connections: int, requests: list[list[Any]]
) -> dict[str, float]:
    """Each server driven by its own wrk at once (its share of the connections and of the
    requests); the rates summed, the worst p99."""
    results: list[dict[str, Any]] = [{} for _ in servers]
    share = max(1, connections // len(servers))

    def run(n: int) -> None:
        results[n] = bench._wrk(
            servers[n].base_url, key, share, requests[n :: len(servers)], bench.WRK["seconds"]
        )

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(servers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [r["error"] for r in results if r["error"]]
    if failed:
        raise RuntimeError("; ".join(failed))
    return {
        "rate": sum(r["count"] / r["wall"] for r in results),
        "p99": max(r["p99"] for r in results) * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", default="1,2")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--format", choices=["table", "markdown"], default="table")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is needed (apt-get install wrk)", file=sys.stderr)
        return 2
    bench.WRK.update(seconds=args.seconds, warmup=0.0)
    workdir = Path(tempfile.mkdtemp(prefix="ratings-bench-instances-"))
    rows: list[list[str]] = []
    try:
        for count in [int(n) for n in args.instances.split(",")]:
            name = f"ratings_bench_instances_{count}"
            url = bench.create_postgres(args.postgres, name)
            servers: list[Any] = []
            try:
                key = bench.prepare_database(url)
                for n in range(count):
                    server = bench.service_server(
                        url,
                        bench.free_port(),
                        args.workers,
                        workdir / f"{count}-{n}.log",
                        args.connections,
                    )
                    server.start()
                    servers.append(server)
                import httpx

                with httpx.Client(
                    base_url=servers[0].base_url,
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=120,
                ) as admin:
                    made = admin.post("/v1/ladders", json={"id": "l", "algorithm": "trueskill"})
                    assert made.status_code == 201, made.text
                    seed = [{"teams": [[f"p{2 * n}"], [f"p{2 * n + 1}"]]} for n in range(5000)]
                    for start in range(0, len(seed), 1000):
                        answer = admin.post(
                            "/v1/ladders/l/matches/batch",
                            json={"matches": seed[start : start + 1000]},
                        )
                        assert answer.status_code == 201, answer.text
                writes = bench.post_requests("/v1/ladders/l/matches", _bodies(200_000, "w", 1))
                reads = [["GET", f"/v1/ladders/l/players/p{n}", None] for n in range(PLAYERS)]
                for case, requests in (("POST match 1v1", writes), ("player with rank", reads)):
                    figures = _drive(servers, key, args.connections, requests)
                    rows.append(
                        [
                            str(count),
                            str(args.workers),
                            case,
                            f"{figures['rate']:,.0f}",
                            f"{figures['p99']:.1f}",
                        ]
                    )
                    print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
            finally:
                for server in servers:
                    server.stop()
                from app.storage.engine import dispose_engines

                dispose_engines()
                bench.drop_postgres(args.postgres, name)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(["instances", "workers each", "case", "per second", "p99 ms"], rows, args.format)
    print(
        f"\n- {args.connections} connections in all, wrk per instance, {args.seconds:g} s a case; "
        f"machine: {bench.machine()}"
    )
    print(f"- command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
