# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test session set-up shared by tests/unit and tests/integration."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402  pylint: disable=wrong-import-position

import cpu_ledger  # noqa: E402  pylint: disable=wrong-import-position
from procs import TestCgroup  # noqa: E402  pylint: disable=wrong-import-position
from sglang_corpus import materialize  # noqa: E402  pylint: disable=wrong-import-position

UNIT_TESTS = Path(__file__).resolve().parent / 'unit'
CGROUP_KEY = pytest.StashKey()


def pytest_addoption(parser):
    cpu_ledger.add_option(parser)


def pytest_configure(config):
    cpu_ledger.configure(config)
    materialize()


# A test file whose module-scoped fixture boots a test host (and deploys SGLang on it) or builds a package repository
# says so with `pytestmark = pytest.mark.xdist_group('<its name>')` (in its pytestmark list): with `-n N --dist loadgroup`
# (tests/run-all.sh) all its tests go to one worker, so that set-up runs once instead of once per worker that got one
# of its tests (xdist's default 'load' hands the first quarter of the tests out one by one, round robin). xdist 3.8
# reads the mark by appending '@<group>' to each test's node id, which pytest 9.2 ignores (pytest-dev/pytest-xdist#1386):
# the scheduler below reads each file's group from its source instead (the controller has no collected items), and
# leaves every other test a work unit of its own, as 'load' does.
# Wall seconds of each integration test file in CI run ci-c (2026-12-04, tests/run-all.sh's 'controller CPU by test
# file' table, WALL-S), for the order above: only their order matters. A file not listed counts 0 (it goes last).
FILE_SECONDS = {
    'test_wait_for_sglang_live_replay': 488, 'test_faults_kill': 451, 'test_demo': 431, 'test_faults': 430,
    'test_nvidia_role_apt': 401, 'test_nvidia_fix_dnf': 297, 'test_sglang_flags_real_parser': 212, 'test_faults_disk': 197,
    'test_faults_link': 178, 'test_embedding': 160, 'test_nvidia_driver_match_ns': 158, 'test_sglang_service_bad_args': 144,
    'test_nvidia_fix_apt': 122, 'test_wait_for_sglang_playbook': 108, 'test_sglang_service_rollback': 99,
    'test_host_lock_playbook': 68, 'test_nvidia_driver_role': 63, 'test_sglang_server_flags_playbook': 62,
    'test_sglang_sm120_patch_role': 54, 'test_sglang_service_guard_off': 43, 'test_brief_callback': 38,
    'test_tune_refusals': 17, 'test_playbooks_no_hosts': 16, 'test_execution_environment': 10, 'test_readme_install': 10,
}
XDIST_GROUP = re.compile(r"""pytest\.mark\.xdist_group\(\s*(?:name\s*=\s*)?['"]([^'"]+)['"]""")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue('dist') != 'loadgroup':
        return None
    from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel

    groups = {}

    def file_group(path):
        if path not in groups:
            try:
                match = XDIST_GROUP.search((config.rootpath / path).read_text(encoding='utf-8'))
            except OSError:
                match = None
            groups[path] = match.group(1) if match else None
        return groups[path]

    tests_per_file = {}

    def expected_seconds(scope):
        """What a work unit took in the last measured run: its file's seconds, shared by its tests when each is a unit."""
        if '::' not in scope:
            return FILE_SECONDS.get(scope, 0.0)
        stem = Path(scope.split('::', 1)[0]).stem
        return FILE_SECONDS.get(stem, 0.0) / max(1, tests_per_file.get(stem, 1))

    class FileGroupScheduling(LoadScopeScheduling):
        """'loadgroup' by each file's xdist_group mark; a test of a file without one is a work unit of its own. The
        longest units go first (xdist orders them by their number of tests: the single long demos started last and ran
        on one worker while the others were done)."""

        def _split_scope(self, nodeid):
            return file_group(nodeid.split('::', 1)[0]) or nodeid

        def _assign_work_unit(self, node):
            if not tests_per_file:
                for nodeid in self.collection or ():
                    stem = Path(nodeid.split('::', 1)[0]).stem
                    tests_per_file[stem] = tests_per_file.get(stem, 0) + 1
            for scope in sorted(self.workqueue, key=expected_seconds, reverse=True):
                self.workqueue.move_to_end(scope)
            return super()._assign_work_unit(node)

    return FileGroupScheduling(config, log)


# A unit test leaves no process behind. It runs in a cgroup of its own from the start of its set-up (before fixtures of
# any scope) to the end of its teardown; whatever is still in that cgroup then, daemons included, is killed and the
# test's teardown fails naming it (tests/procs.py). ansible-test runs each unit test in a fork that ends with os._exit,
# so a process shared across tests (a module-scoped fixture) is never stopped there: it counts as left behind.
# Integration tests are held by tests/run-all.sh's last step instead: their test hosts and SSH masters live as long
# as their module's fixtures.
def _is_unit(item):
    return UNIT_TESTS in Path(str(item.fspath)).resolve().parents


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if _is_unit(item):
        cgroup = TestCgroup(item.nodeid)
        if cgroup.enter():
            item.stash[CGROUP_KEY] = cgroup
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    del nextitem
    try:
        return (yield)
    finally:
        cgroup = item.stash.get(CGROUP_KEY, None)
        if cgroup is not None:
            del item.stash[CGROUP_KEY]
            left = cgroup.leave()
            if left:
                pytest.fail('the test left these processes running (killed now): %s' % '; '.join(left), pytrace=False)
