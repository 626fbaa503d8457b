import os
import tempfile

import pytest

# No test writes into the user's real data: the default home (the user data directory,
# runtime/home.py) resolves inside a scratch folder, and PARALLAX_HOME is set before anything (a
# session fixture, a subprocess) can read it; each test then gets its own home (`_isolated_home`).
_SCRATCH = tempfile.mkdtemp(prefix="parallax-tests-")
os.environ["XDG_DATA_HOME"] = os.path.join(_SCRATCH, "xdg-data")
os.environ["PARALLAX_HOME"] = os.path.join(_SCRATCH, "home")

# In CI a skipped test is a failure: a test that skips because a service or tool is
# missing would otherwise hide the missing feature.
SKIPS_FAIL = bool(os.environ.get("CI"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if SKIPS_FAIL and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI is set): {report.longrepr}"
    return report


# Unit tests never touch a real endpoint; integration tests set what they need.
os.environ.setdefault("PARALLAX_RESPONSE_FORMAT", "json_object_schema")
# Votes sample at one temperature by default, so a wave is one request with `n`. The tests script
# each vote's reply by its temperature, so they give votes a spread (each vote its own temperature
# and request); the tests of the default (test_wave_request.py) unset these.
os.environ.setdefault("PARALLAX_VOTE_TEMPERATURE_MIN", "0.3")
os.environ.setdefault("PARALLAX_VOTE_TEMPERATURE_MAX", "1.0")


class SettingsMonkeyPatch(pytest.MonkeyPatch):
    """pytest's MonkeyPatch that has the process re-read its settings (runtime/settings.py's
    `reload_settings`) whenever a test changes the environment or the working folder (`.env`,
    ./.parallax), and again when the changes are undone: the process reads its settings once, as a
    CLI command or an API call would, and a test that sets a variable is a process changing its
    environment on purpose."""

    def setenv(self, name: str, value: str, prepend: str | None = None) -> None:
        super().setenv(name, value, prepend)
        _reload_settings()

    def delenv(self, name: str, raising: bool = True) -> None:
        super().delenv(name, raising)
        _reload_settings()

    def chdir(self, path) -> None:
        super().chdir(path)
        _reload_settings()

    def undo(self) -> None:
        super().undo()
        _reload_settings()


def _reload_settings() -> None:
    from parallax.runtime.settings import reload_settings

    reload_settings()


@pytest.fixture
def monkeypatch():
    """Every test's `monkeypatch` reloads the settings after it changes the environment
    (SettingsMonkeyPatch)."""
    patch = SettingsMonkeyPatch()
    yield patch
    patch.undo()


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """Every test gets its own PARALLAX_HOME, fresh process services (circuit breakers) and no
    straggler history, so no test sees another's."""
    from parallax.runtime.services import renew_process_services

    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "parallax-home"))
    renew_process_services()


@pytest.fixture
def scripted_endpoint(monkeypatch):
    """`start(FaultConfig)` starts the scripted OpenAI-compatible server (testkit/fault_server.py)
    and points every model call of the test at it, in OpenAI's json_schema form; returns its …/v1
    URL. Stopped after.
    """
    from parallax.runtime.chat_models import forget_clients
    from testkit.fault_server import FaultServer

    running = []

    def start(config) -> str:
        server = FaultServer(config)
        url = server.start()
        running.append(server)
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("PARALLAX_RESPONSE_FORMAT", "json_schema")
        forget_clients()
        return url

    yield start
    for server in running:
        server.stop()
    forget_clients()
