"""An attacker with one tenant's key gets nowhere: every attempt of testkit/attacks.py holds (deploy
test).

One replica of `parallax serve` (PostgreSQL, Redis, two tenants, the scripted model): each attempt
is answered 4xx, or, where the request is legitimate, handled within its bounds, and nothing happens
meanwhile: no command runs, nothing is written under the other tenant, nothing is written into the
internal namespaces through /store, no run is left running. bench/attack.py prints the same table
with the replica's memory and /ok latency through the attack. Needs the server venv (a skip fails in
CI).
"""

from __future__ import annotations

import pytest

from testkit import attacks
from testkit.aegra_cluster import two_replicas

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
SECRETS = {
    "PARALLAX_WEBHOOK_SECRETS": (
        f"{attacks.TENANT}:a-webhook-secret-of-acme,{attacks.OTHER_TENANT}:a-webhook-secret-of-beta"
    )
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_replicas(
        tmp_path_factory.mktemp("deploy-attacks"), attacks.reply, attacks.KEYS, 8, SECRETS
    ) as running:
        yield running


async def test_every_attempt_is_refused_or_bounded_and_nothing_happens(cluster, tmp_path):
    a, _ = cluster.live()
    ground = attacks.Ground(a.url, cluster.database_url, tmp_path)
    await attacks.prepare(ground)
    rows = await attacks.run_attacks(ground)
    print(attacks.as_json(rows))
    assert len(rows) >= 40
    failed = [f"{r.n}. {r.attack}: {r.status} {r.side_effect or r.got}" for r in rows if not r.held]
    assert failed == [], "\n".join(failed)
    assert not list(tmp_path.glob("pwned-*"))
    assert all((r.status or 0) < 500 for r in rows)
