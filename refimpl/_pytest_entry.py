"""What refimpl's pytest11 entry point registers when refimpl is installed: the
``refimpl_fixtures`` ini option, nothing else (no fixture, no import of torch), so other test
suites in the same environment run unchanged. ``refimpl_fixtures = true`` loads
refimpl.testing.plugin, as ``pytest -p refimpl.testing.plugin`` does."""
from __future__ import annotations


class _EntryPoint:
    def pytest_addoption(self, parser) -> None:
        parser.addini("refimpl_fixtures", "enable refimpl's fixtures (refimpl.testing.plugin)",
                      type="bool", default=False)

    def pytest_configure(self, config) -> None:
        if config.getini("refimpl_fixtures"):
            config.pluginmanager.import_plugin("refimpl.testing.plugin")


entry_point = _EntryPoint()
