"""refimpl's pytest11 entry point: the ``refimpl_fixtures`` ini option and nothing else;
``refimpl_fixtures = true`` loads refimpl.testing.plugin.
"""
from __future__ import annotations


class _EntryPoint:
    def pytest_addoption(self, parser) -> None:
        parser.addini("refimpl_fixtures", "enable refimpl's fixtures (refimpl.testing.plugin)",
                      type="bool", default=False)

    def pytest_configure(self, config) -> None:
        if config.getini("refimpl_fixtures"):
            config.pluginmanager.import_plugin("refimpl.testing.plugin")


entry_point = _EntryPoint()
