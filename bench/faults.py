"""Faults benchmark: what a database partition, a database restart, a Redis outage and a replica
SIGKILL cost a running deployment.

Why: the deployed API promises that no accepted run is lost, none ends twice, no trace or playbook
version is written twice, and a replica that lost a run's lease calls the model for it no more. This
builds the deployment the promise is about on real processes (testkit/fault_lab.py: PostgreSQL,
Redis and each replica in a network namespace of its own, veth links, nothing routed; needs root),
then, per fault, starts `--runs` solve runs (`--votes` votes each, asked one after another) and one
learn run, injects the fault once the first run has answers, ends it, and waits for every run
(testkit/fault_scenarios.py). Per fault, `--rounds` times, summed:

  runs                      runs started (solve + learn) lost                      runs that did not
  end `success`                      (goal 0) finished_twice            runs two executions ran to
  the end                   (goal 0) traces_twice              second traces of a run
  (goal 0) playbook_versions_twice   second versions of one learn batch                   (goal 0)
  duplicate_model_calls     answered model calls repeated for the same vote of the same run
  stale_writes_refused      writes the database refused as coming from a lost lease
  calls_after_lease_lost    (partition) model calls by the cut-off replica after its runs were taken
  over (goal 0) takeovers                 runs claimed again by another execution recover_s
  seconds from the fault's end to the last run's end (max over rounds)

Prints one JSON object on stdout ({"faults": {fault: figures}, "goal_met": bool}); progress on
stderr.

    sudo python -m bench.faults --rounds 2 --runs 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testkit.fault_lab import lab_missing
from testkit.fault_scenarios import FAULTS, running_lab, scenario

SUMMED = (
    "runs",
    "lost",
    "finished_twice",
    "traces_twice",
    "trace_rewrites",
    "playbook_versions",
    "playbook_versions_twice",
    "duplicate_model_calls",
    "repeated_model_requests",
    "model_calls",
    "stale_writes_refused",
    "stale_ends_refused",
    "takeovers",
    "calls_after_lease_lost",
)


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        k: sum(r.get(k, 0) for r in rounds) for k in SUMMED if any(k in r for r in rounds)
    }
    out["rounds"] = len(rounds)
    out["recover_s"] = max(r["recover_s"] for r in rounds)
    out["fault_s"] = round(sum(r["fault_s"] for r in rounds) / len(rounds), 2)
    out["lost_runs"] = [run for r in rounds for run in r["lost_runs"]]
    return out


def main(args: argparse.Namespace) -> dict[str, Any]:
    if missing := lab_missing():
        raise SystemExit(f"bench.faults needs: {', '.join(missing)}")
    faults = args.faults or list(FAULTS)
    per_fault: dict[str, list[dict[str, Any]]] = {f: [] for f in faults}
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="parallax-bench-faults-") as work,
        running_lab(Path(work)) as lab,
    ):
        print(
            f"lab up in {time.monotonic() - started:.0f}s (10.{lab.octet}.0.0/16)", file=sys.stderr
        )
        for n in range(args.rounds):
            for fault in faults:
                out = scenario(lab, fault, runs=args.runs, votes=args.votes, outage_s=args.outage_s)
                print(f"round {n + 1} {fault}: {json.dumps(out)}", file=sys.stderr)
                per_fault[fault].append(out)
    figures = {fault: combine(rounds) for fault, rounds in per_fault.items()}
    return {
        "faults": figures,
        "goal_met": all(f["lost"] == 0 and f["finished_twice"] == 0 for f in figures.values()),
        "settings": {
            "rounds": args.rounds,
            "runs": args.runs,
            "votes": args.votes,
            "outage_s": args.outage_s,
            "lease_s": 6,
            "heartbeat_s": 2,
            "reaper_s": 2,
        },
        "wall_s": round(time.monotonic() - started, 1),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=2, help="times each fault is injected (default 2)"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="solve runs per fault, besides one learn run (default 3)",
    )
    parser.add_argument(
        "--votes",
        type=int,
        default=4,
        help="votes per solve run, asked one after another (default 4)",
    )
    parser.add_argument(
        "--outage-s",
        type=float,
        default=4.0,
        help="how long PostgreSQL or Redis stays down (default 4)",
    )
    parser.add_argument("--faults", nargs="*", choices=FAULTS, help="which faults (default all)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    print(json.dumps(main(parse_args())))
