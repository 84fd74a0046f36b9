# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where a pytest run spends the controller's CPU, per test file (``--cpu-top N``; tests/run-all.sh asks for it).

The suite is bound by the machine's two cores (issue 21), so a file's CPU seconds, not its wall seconds, say what a cut
is worth. Each phase of a test (set-up, call, teardown; a module fixture's set-up lands in its file's first test) is
measured in the process that runs it: its own CPU plus that of the children it waited for (``ansible-playbook`` and
its forks, ``ssh``, ``pip``). Under xdist the figure travels in the report's ``user_properties``, so the controller
adds up every worker's. Not counted: the test hosts' processes (they run in their machines' cgroups) and daemons the
test did not wait for (an SSH ControlPersist master).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterator, List

import pytest

PROPERTY = 'llmops_cpu_s'
PHASE_START = pytest.StashKey()


def cpu_seconds() -> float:
    """User and system CPU of this process and of every child it waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class FileCost:
    cpu_s: float = 0.0
    wall_s: float = 0.0
    tests: set = field(default_factory=set)


class CpuLedger:
    """The plugin: measures each phase where it runs, adds the figures up where the reports arrive."""

    def __init__(self, top: int):
        self.top = top
        self.files: Dict[str, FileCost] = defaultdict(FileCost)
        # per xdist worker: [first start, last stop, seconds in tests] (epoch seconds, from the reports)
        self.workers: Dict[str, List[float]] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item) -> Iterator[None]:
        return (yield from self._measured(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item) -> Iterator[None]:
        return (yield from self._measured(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem) -> Iterator[None]:
        del nextitem
        return (yield from self._measured(item))

    @staticmethod
    def _measured(item):
        item.stash[PHASE_START] = cpu_seconds()
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        start = item.stash.get(PHASE_START, None)
        if start is not None and call.when == report.when:
            # a list of its own: the report's may be the item's, shared by its three phases
            report.user_properties = list(report.user_properties) + [(PROPERTY, round(cpu_seconds() - start, 3))]
        return report

    def pytest_runtest_logreport(self, report) -> None:
        cpu = dict(report.user_properties).get(PROPERTY)
        if cpu is None:
            return
        cost = self.files[report.nodeid.split('::', 1)[0]]
        cost.cpu_s += cpu
        cost.wall_s += report.duration
        cost.tests.add(report.nodeid)
        node = getattr(report, 'node', None)
        worker = node.gateway.id if node is not None else 'main'
        span = self.workers.setdefault(worker, [report.start, report.stop, 0.0])
        span[0], span[1], span[2] = min(span[0], report.start), max(span[1], report.stop), span[2] + report.duration

    def rows(self) -> List[tuple]:
        ranked = sorted(self.files.items(), key=lambda kv: kv[1].cpu_s, reverse=True)
        return [(path, cost.cpu_s, cost.wall_s, len(cost.tests)) for path, cost in ranked]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if hasattr(terminalreporter.config, 'workerinput'):
            return
        rows = self.rows()
        if not rows:
            return
        total = sum(r[1] for r in rows)
        terminalreporter.write_sep('=', 'controller CPU by test file (top %d of %d; %.1f CPU-s in all)'
                                   % (min(self.top, len(rows)), len(rows), total))
        terminalreporter.write_line('%8s %8s %5s  %s' % ('CPU-S', 'WALL-S', 'TESTS', 'FILE'))
        for path, cpu, wall, tests in rows[:self.top]:
            terminalreporter.write_line('%8.1f %8.1f %5d  %s' % (cpu, wall, tests, path))
        # a worker done long before the last one left its share of the machine idle at the end (the order of the files)
        end = max(span[1] for span in self.workers.values())
        for worker, (_first, last, busy) in sorted(self.workers.items()):
            terminalreporter.write_line('%s: %.0f s in tests, done %.0f s before the last worker' % (worker, busy, end - last))


def add_option(parser) -> None:
    """tests/conftest.py's pytest_addoption."""
    parser.addoption('--cpu-top', type=int, default=0, metavar='N',
                     help='print the N test files that used the most controller CPU (tests/cpu_ledger.py)')


def configure(config) -> None:
    """tests/conftest.py's pytest_configure: the ledger only when asked for."""
    top = config.getoption('cpu_top', 0)
    if top:
        config.pluginmanager.register(CpuLedger(top), 'llmops_cpu_ledger')
