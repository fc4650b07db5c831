"""The cold Go builds of the test cluster: one wrapper module per tool (as up to e56f72b) against one module graph per
set of shared libraries (Kubernetes with Kueue and crictl; helm with CoreDNS), side by side in one run.

Each variant runs its own revision's cluster scripts in a cache of its own (RINGLEADER_CACHE, a temporary directory):
its modules downloaded first (timed apart: that is the network's part), then its builds from an empty Go build
cache, alternating the variants. CPU is the user + system time of the scripts and everything they started. etcd is
the same in both and left out. Takes about 30 minutes on 2 idle cores per repetition; run it on a quiet machine:

    .venv/bin/python bench/bench_go_builds.py [--before e56f72b] [--repetitions 1]

Writes bench/results/go_builds.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# What each variant builds, in its own scripts' words: everything the test cluster's Go chain makes but etcd.
BUILDS = {
    "one module per tool": [["build-kubernetes.sh"], ["build-kueue.sh"],
                            ["build-tools.sh", "crictl", "helm", "coredns"]],
    "shared module graphs": [["build-kubernetes.sh"], ["build-tools.sh", "helm", "coredns"]],
}


def timed(commands: list[list[str]], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the commands run one after the other."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    for command in commands:
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, time.monotonic() - start


def run_variant(name: str, checkout: pathlib.Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="go-builds-") as cache:
        env = {**os.environ, "RINGLEADER_CACHE": cache}
        cluster = checkout / "cluster"
        download_cpu, download_wall = timed([[str(cluster / "download-modules.sh")]], env)
        cpu, wall = timed([[str(cluster / script), *args] for script, *args in BUILDS[name]], env)
        subprocess.run(["chmod", "-R", "u+w", cache], check=False)  # the module cache is read-only
    print(f"{name}: builds {cpu:.0f} CPU-s, {wall:.0f} s wall (modules: {download_cpu:.0f} CPU-s, "
          f"{download_wall:.0f} s)", flush=True)
    return {"cpu_s": cpu, "wall_s": wall, "download_cpu_s": download_cpu, "download_wall_s": download_wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="e56f72b", help="the revision with one wrapper module per tool")
    parser.add_argument("--repetitions", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in BUILDS}
    with tempfile.TemporaryDirectory(prefix="go-builds-before-") as before:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", before, args.before], check=True,
                       stdout=subprocess.DEVNULL)
        try:
            for _ in range(args.repetitions):
                results["one module per tool"].append(run_variant("one module per tool", pathlib.Path(before)))
                results["shared module graphs"].append(run_variant("shared module graphs", ROOT))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", before], check=False)
    median = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for name, runs in results.items()}
    old, new = median["one module per tool"], median["shared module graphs"]
    print(f"shared / one per tool: CPU {new['cpu_s'] / old['cpu_s']:.2f}, wall {new['wall_s'] / old['wall_s']:.2f} "
          f"(median of {args.repetitions})")
    out = ROOT / "bench" / "results" / "go_builds.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"before": args.before, "runs": results, "median": median}, indent=2))


if __name__ == "__main__":
    main()
