"""Faults on real processes: replicas, PostgreSQL and Redis on hosts of their own (network
namespaces made by testkit/fault_lab.py), the scripted model counting every call
(testkit/fault_server.py).

For each fault, mid-run (testkit/fault_scenarios.py): no run is lost, none ends twice, no trace and
no playbook version is written twice. Cutting a replica off from the database is the case fencing
exists for: another replica takes its runs over, and the cut-off replica calls the model for none of
them once it has lost their leases (server/lease_fence.py); a write it had already sent is refused
by the database when it arrives after the takeover.

Needs root, /usr/local/bin/{initdb,pg_ctl}, /usr/bin/redis-server and the server venv; `.ci/run`
runs it with the deploy tests (a skip fails in CI). Each scenario prints its tally, as
`bench.faults` does.
"""

from __future__ import annotations

import json

import pytest

from testkit.fault_lab import lab_missing
from testkit.fault_scenarios import running_lab, scenario

pytestmark = [pytest.mark.integration, pytest.mark.deploy]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if missing := lab_missing():
        pytest.skip("the fault lab needs: " + ", ".join(missing))
    with running_lab(tmp_path_factory.mktemp("faults")) as running:
        yield running


def kept_promises(out: dict) -> None:
    print(json.dumps(out))
    assert out["statuses"] == {"success": out["runs"]}, out  # every run ended, and ended well
    assert out["lost"] == 0, out
    # a takeover that runs a run's last step again (a database restart between its trace and the
    # checkpoint after it) leaves the first end: no run ends twice (docs/deploy.md, Faults and
    # fencing)
    assert out["finished_twice"] == 0, out
    assert out["traces_twice"] == 0, (
        out
    )  # one trace per run (written again by the same execution at most)
    assert out["playbook_versions"] == 1 and out["playbook_versions_twice"] == 0, (
        out
    )  # the learn run committed once


def test_a_replica_cut_off_from_the_database_is_fenced_and_its_runs_finish_elsewhere(lab):
    out = scenario(lab, "partition")
    kept_promises(out)
    assert out["takeovers"] >= 1, out  # the other replica took the cut-off replica's runs over
    assert out["calls_after_lease_lost"] == 0, (
        out
    )  # ... and from then on the cut-off replica called nothing


def test_a_database_restart_mid_run_loses_nothing(lab):
    kept_promises(scenario(lab, "db_restart"))


def test_a_redis_outage_mid_run_loses_nothing(lab):
    kept_promises(scenario(lab, "redis_outage"))


def test_a_replica_killed_mid_run_loses_nothing(lab):
    out = scenario(lab, "replica_kill")
    kept_promises(out)
    assert out["takeovers"] >= 1, (
        out
    )  # (answers the killed replica had not saved yet are asked again: counted)
