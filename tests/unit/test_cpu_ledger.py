# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/cpu_ledger.py in a real pytest run: a file whose child burns the CPU ranks above one that only waits, with
and without xdist workers (the figure travels to the controller in the reports)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = '''
import sys
sys.path.insert(0, %r)
import cpu_ledger
def pytest_addoption(parser):
    cpu_ledger.add_option(parser)
def pytest_configure(config):
    cpu_ledger.configure(config)
''' % str(TESTS)

BURNS = '''
import subprocess, sys
def test_child_burns():
    # a child process the test waits for: its CPU counts (an ansible-playbook run is such a child)
    subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6: pass'], check=True)
'''

WAITS = '''
import time
def test_waits():
    time.sleep(0.6)
'''


def ledger_rows(tmp_path, *extra):
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')
    (tmp_path / 'conftest.py').write_text(CONFTEST)
    (tmp_path / 'test_burns.py').write_text(BURNS)
    (tmp_path / 'test_waits.py').write_text(WAITS)
    proc = subprocess.run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', '--cpu-top', '5', *extra],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120, check=False,
                          # a pytest of its own: not the plugins ansible-test gives its units (PYTEST_PLUGINS)
                          env=dict((k, v) for k, v in os.environ.items() if not k.startswith('PYTEST_')))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split() == ['CPU-S', 'WALL-S', 'TESTS', 'FILE'])
    rows = {}
    for line in lines[head + 1:head + 3]:
        cpu, wall, tests, path = line.split()
        rows[path] = (float(cpu), float(wall), int(tests))
    workers = [line.split(':', 1)[0] for line in lines[head + 3:] if ' s in tests, done ' in line]
    return rows, workers


@pytest.mark.parametrize('extra', [(), ('-n', '2')], ids=['in-process', 'xdist'])
def test_the_file_that_burns_cpu_ranks_first(tmp_path, extra):
    if extra:
        pytest.importorskip('xdist')
    rows, workers = ledger_rows(tmp_path, *extra)
    # one line per process that ran tests: the two xdist workers, or the main process
    assert workers == (['gw0', 'gw1'] if extra else ['main'])
    assert list(rows) == ['test_burns.py', 'test_waits.py']
    burn_cpu, _burn_wall, burn_tests = rows['test_burns.py']
    wait_cpu, wait_wall, wait_tests = rows['test_waits.py']
    assert (burn_tests, wait_tests) == (1, 1)
    assert burn_cpu >= 0.5
    assert wait_cpu < 0.3 <= 0.5 <= wait_wall
