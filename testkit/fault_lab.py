"""A deployment in network namespaces, for fault tests: PostgreSQL, Redis and each replica on a host
of its own.

Why this exists: a replica cut off from the database while it still reaches the model, a database
restart and a Redis outage can only be tested on real processes and a real network. As root, this
module builds one on this machine and removes it afterwards:

    root namespace (the test, the scripted model, the clients)
      |  veth 10.B.0.0/24        |  veth 10.B.1.0/24       |  veth 10.B.(10+i).0/24
    <tag>-db  PostgreSQL      <tag>-rd  Redis           <tag>-r<i>  replica i (`parallax serve`)
      |  veth 10.B.(20+i).0/24 to replica i                 |
                                 |  veth 10.B.(30+i).0/24 to replica i

Every link is a veth pair between two namespaces, each end with its own address: nothing is
routed or forwarded, no iptables rule is made, and no address outside the lab's own 10.B.0.0/16
(B picked among those no interface of this machine uses) is ever a target. A replica reaches the
database and Redis over its own links, so `partition(i)` (`ip link set down` on replica i's end
of its database link) cuts it off from the database alone: it keeps Redis, the model and its
clients. PostgreSQL is a private cluster (initdb into a temporary folder, run as the `postgres`
user), Redis a private `redis-server` that keeps nothing on disk. `close()` (also on failure, and
from an atexit hook) kills what it started and deletes the namespaces, which removes their veths.

The scripted model (testkit/fault_server.py) runs in the test process on the root end of
replica 0's link; the other replicas reach it through a host route over their own link.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parallax.runtime.model_server import wait_for_200
from testkit.aegra_cluster import FAST_LEASES, PARALLAX, ROOT, ClusterError, Replica

PG_BIN = Path("/usr/local/bin")
REDIS_SERVER = Path("/usr/bin/redis-server")
PORT = 2026


def lab_missing() -> list[str]:
    """What the lab needs and this machine lacks (empty when all is there)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces)")
    for tool in (
        PG_BIN / "initdb",
        PG_BIN / "pg_ctl",
        REDIS_SERVER,
        Path(shutil.which("ip") or "/nonexistent"),
        Path(shutil.which("runuser") or "/nonexistent"),
    ):
        if not tool.exists():
            missing.append(str(tool))
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        missing.append("the postgres user")
    try:
        import aegra_api  # noqa: F401
    except ImportError:
        missing.append("Aegra (the server venv)")
    return missing


def run(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise ClusterError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def _used_second_octets() -> set[int]:
    out = run("ip", "-4", "-o", "addr", "show").stdout
    used = set()
    for line in out.splitlines():
        for word in line.split():
            if "/" in word and word[0].isdigit():
                address = ipaddress.ip_interface(word).ip
                if address in ipaddress.ip_network("10.0.0.0/8"):
                    used.add(int(str(address).split(".")[1]))
    return used


@dataclass
class LabReplica(Replica):
    host: str = "127.0.0.1"
    namespace: str = ""
    index: int = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass
class FaultLab:
    """Namespaces, PostgreSQL, Redis, the replicas; `env` is added to every replica's
    environment."""

    work: Path
    replicas_wanted: int = 2
    env: dict[str, str] = field(default_factory=dict)
    tag: str = field(default_factory=lambda: f"px{uuid.uuid4().hex[:5]}")
    octet: int = 0
    namespaces: list[str] = field(default_factory=list)
    replicas: list[LabReplica] = field(default_factory=list)
    redis: subprocess.Popen[bytes] | None = None
    model: Any = None
    pg_root: Path | None = None
    """A folder the `postgres` user can reach (a test's tmp_path is root's alone)."""
    _closed: bool = False

    # --- addresses -----------------------------------------------------------------------

    def addr(self, link: int, side: int) -> str:
        return f"10.{self.octet}.{link}.{side}"

    @property
    def db_ns(self) -> str:
        return f"{self.tag}-db"

    @property
    def redis_ns(self) -> str:
        return f"{self.tag}-rd"

    def replica_ns(self, i: int) -> str:
        return f"{self.tag}-r{i}"

    @property
    def admin_url(self) -> str:
        """The lab database, from the test (root namespace)."""
        return f"postgresql://postgres@{self.addr(0, 2)}:5432/parallax"

    @property
    def model_host(self) -> str:
        return self.addr(10, 1)

    # --- building ------------------------------------------------------------------------

    def _veth(self, name: str, ns_a: str | None, addr_a: str, ns_b: str, addr_b: str) -> None:
        """A veth pair `name`a (in ns_a, None = root) and `name`b (in ns_b), both up with their /24
        addresses."""
        a, b = f"{name}a", f"{name}b"
        run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        run("ip", "link", "set", b, "netns", ns_b)
        if ns_a is not None:
            run("ip", "link", "set", a, "netns", ns_a)
        self._in(ns_a, "ip", "addr", "add", f"{addr_a}/24", "dev", a)
        self._in(ns_a, "ip", "link", "set", a, "up")
        self._in(ns_b, "ip", "addr", "add", f"{addr_b}/24", "dev", b)
        self._in(ns_b, "ip", "link", "set", b, "up")

    def _in(
        self, ns: str | None, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return run(*(("ip", "netns", "exec", ns) if ns else ()), *args, check=check)

    def create(self) -> FaultLab:
        if missing := lab_missing():
            raise ClusterError("the fault lab needs: " + ", ".join(missing))
        used = _used_second_octets()
        self.octet = random.choice([n for n in range(200, 250) if n not in used])
        atexit.register(self.close)
        self.work.mkdir(parents=True, exist_ok=True)
        try:
            for ns in (
                self.db_ns,
                self.redis_ns,
                *(self.replica_ns(i) for i in range(self.replicas_wanted)),
            ):
                run("ip", "netns", "add", ns)
                self.namespaces.append(ns)
                self._in(ns, "ip", "link", "set", "lo", "up")
            self._veth(f"{self.tag}d", None, self.addr(0, 1), self.db_ns, self.addr(0, 2))
            self._veth(f"{self.tag}s", None, self.addr(1, 1), self.redis_ns, self.addr(1, 2))
            for i in range(self.replicas_wanted):
                ns = self.replica_ns(i)
                self._veth(f"{self.tag}{i}h", None, self.addr(10 + i, 1), ns, self.addr(10 + i, 2))
                self._veth(
                    f"{self.tag}{i}d", self.db_ns, self.addr(20 + i, 1), ns, self.addr(20 + i, 2)
                )
                self._veth(
                    f"{self.tag}{i}s", self.redis_ns, self.addr(30 + i, 1), ns, self.addr(30 + i, 2)
                )
                # the scripted model listens on replica 0's link: a host route to it over this
                # replica's own
                if i:
                    self._in(
                        ns, "ip", "route", "add", f"{self.model_host}/32", "dev", f"{self.tag}{i}hb"
                    )
            self._start_postgres()
            self.start_redis()
        except BaseException:
            self.close()
            raise
        return self

    # --- PostgreSQL ------------------------------------------------------------------------

    @property
    def pgdata(self) -> Path:
        if self.pg_root is None:
            self.pg_root = Path(tempfile.mkdtemp(prefix="parallax-lab-pg-"))
            self.pg_root.chmod(0o755)
            shutil.chown(self.pg_root, "postgres", "postgres")
        return self.pg_root / "data"

    def _pg(self, *args: str, timeout: float = 60) -> None:
        self._in(
            self.db_ns,
            "runuser",
            "-u",
            "postgres",
            "--",
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.pgdata),
            *args,
        )

    def _start_postgres(self) -> None:
        self.pgdata.mkdir(mode=0o700)
        shutil.chown(self.pgdata, "postgres", "postgres")
        run(
            "runuser",
            "-u",
            "postgres",
            "--",
            str(PG_BIN / "initdb"),
            "-D",
            str(self.pgdata),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            timeout=120,
        )
        with open(self.pgdata / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all 10.{self.octet}.0.0/16 trust\n")
        with open(self.pgdata / "postgresql.conf", "a") as conf:
            conf.write(
                f"listen_addresses = '*'\nunix_socket_directories = '{self.pgdata}'\nfsync = off\n"
                "max_connections = 200\n"
            )
        self.start_postgres()
        import psycopg

        with psycopg.connect(
            self.admin_url.rsplit("/", 1)[0] + "/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE parallax")

    def start_postgres(self) -> None:
        self._pg("-l", str(self.pgdata.parent / "postgres.log"), "-w", "-t", "60", "start")

    def stop_postgres(self) -> None:
        self._pg("-m", "fast", "-w", "stop")

    # --- Redis ---------------------------------------------------------------------------

    def start_redis(self) -> None:
        log = open(self.work / "redis.log", "ab")  # noqa: SIM115 - kept open by the child
        self.redis = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.redis_ns,
                str(REDIS_SERVER),
                "--port",
                "6379",
                "--bind",
                "0.0.0.0",
                "--protected-mode",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        import redis

        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis(host=self.addr(1, 2), port=6379, socket_connect_timeout=1).ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline or self.redis.poll() is not None:
                    raise ClusterError(
                        f"redis did not start: {(self.work / 'redis.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)

    def stop_redis(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(10)
        self.redis = None

    # --- the network ---------------------------------------------------------------------

    def partition(self, replica: LabReplica) -> None:
        """Cut `replica` off from the database (it keeps Redis, the model and its clients)."""
        self._in(replica.namespace, "ip", "link", "set", f"{self.tag}{replica.index}db", "down")

    def heal(self, replica: LabReplica) -> None:
        self._in(replica.namespace, "ip", "link", "set", f"{self.tag}{replica.index}db", "up")

    # --- replicas ------------------------------------------------------------------------

    def replica_env(self, i: int) -> dict[str, str]:
        env = {
            **os.environ,
            "DATABASE_URL": f"postgresql://postgres@{self.addr(20 + i, 1)}:5432/parallax",
            "REDIS_URL": f"redis://{self.addr(30 + i, 1)}:6379/0",
            "PARALLAX_HOME": str(self.work / f"home-{i}"),
            "LOG_LEVEL": "warning",
            "CRON_ENABLED": "false",
            "LANGSMITH_TRACING": "false",
            "NO_PROXY": "*",
            **FAST_LEASES,
            **self.env,
        }
        for name in (
            "PARALLAX_DATABASE_URL",
            "PARALLAX_GGUF",
            "PARALLAX_VOTE_MODELS",
            "PARALLAX_JUDGE_MODEL",
            "AEGRA_CONFIG",
            "HOST",
            "PORT",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "http_proxy",
            "https_proxy",
        ):
            env.pop(name, None)
        return env

    def launch(self, i: int) -> LabReplica:
        ns, host = self.replica_ns(i), self.addr(10 + i, 2)
        log_path = self.work / f"replica-{i}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    str(PARALLAX),
                    "serve",
                    "--host",
                    host,
                    "--port",
                    str(PORT),
                ],
                cwd=ROOT,
                env=self.replica_env(i),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        replica = LabReplica(PORT, process, log_path, host=host, namespace=ns, index=i)
        self.replicas.append(replica)
        return replica

    def start_replica(self, i: int, timeout_s: float = 120.0) -> LabReplica:
        replica = self.launch(i)
        outcome = wait_for_200(f"{replica.url}/ready", timeout_s, alive=replica.alive)
        if outcome != "ready":
            replica.kill()
            raise ClusterError(f"replica {i} {outcome}:\n{replica.log()[-4000:]}")
        return replica

    def live(self) -> list[LabReplica]:
        return [r for r in self.replicas if r.alive()]

    def executing_replica(self, run_id: str) -> LabReplica | None:
        """The replica whose worker holds `run_id` now (runs.claimed_by is
        <host>-<pid>-worker-<n>)."""
        claimed = self.query("SELECT claimed_by FROM runs WHERE run_id = %s", run_id)
        text = str((claimed or [[None]])[0][0] or "")
        return next((r for r in self.replicas if r.alive() and f"-{r.pid}-worker-" in text), None)

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.admin_url, connect_timeout=5) as conn:
            return list(conn.execute(sql, params).fetchall())

    # --- the end -------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for replica in self.replicas:
            try:
                replica.stop(10)
            except Exception:  # noqa: BLE001 - cleanup goes on
                replica.kill()
        self.stop_redis_quietly()
        if self.pg_root is not None:
            self._pg_quietly()
            shutil.rmtree(self.pg_root, ignore_errors=True)
        for ns in self.namespaces:
            for pid in run("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            run("ip", "netns", "del", ns, check=False)  # its veths go with it
        for link in (
            f"{self.tag}da",
            f"{self.tag}sa",
            *(f"{self.tag}{i}ha" for i in range(self.replicas_wanted)),
        ):
            run("ip", "link", "del", link, check=False)
        atexit.unregister(self.close)

    def stop_redis_quietly(self) -> None:
        try:
            self.stop_redis()
        except Exception:  # noqa: BLE001
            if self.redis is not None:
                self.redis.kill()

    def _pg_quietly(self) -> None:
        run(
            "runuser",
            "-u",
            "postgres",
            "--",
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.pgdata),
            "-m",
            "immediate",
            "-w",
            "stop",
            check=False,
        )

    def __enter__(self) -> FaultLab:
        return self.create()

    def __exit__(self, *exc: Any) -> None:
        self.close()
