import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so a fixture can tell whether the test failed (a
    screenshot then)."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
