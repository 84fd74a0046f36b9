# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Role level, through the real deploy playbook over SSH to a systemd-nspawn host: sglang_service_guard off runs
llmops.sglang.sglang_guard only where a guard is installed (issue 21: its state=absent run built the role's largest
payload, about 465 KB, on every full deploy of every host that never had a guard).

1. A first deploy with the guard off (the default) on a fresh host runs no sglang_guard at all.
2. A deploy with the guard on installs it (its timer, service and settings are on the host).
3. The guard turned off, nothing else changed: the next run is a no-change one, and it removes the guard (the no-change
   query saw its files): changed, every file of the guard gone, the server not restarted.
4. The run after it: changed=0, and again no sglang_guard run.

The first deploy makes the compile caches in its sglang_service_layout run (no sglang_compile_cache run). Its restart is
one module run, sglang_restart: no stat of the log, systemctl reset-failed command,
systemd_service or sglang_run_offset around it, and its wheelhouse is sent without a stat of each file first (issue
21, each a module run per host).

Which modules a run ran is read from ansible-playbook -vvv ("Using module file .../sglang_guard.py").

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_sglang_service_guard_off.py
Needs root (fleet.sh) and PyPI on the first run for the wheel (tests/sglang_wheels.py caches it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position

NODE = os.environ.get('LLMOPS_GUARD_OFF_HOST') or 'guardoff-' + os.environ.get('PYTEST_XDIST_WORKER', 'gw')
GUARD_FILES = ('/etc/systemd/system/sglang-guard.timer', '/etc/systemd/system/sglang-guard.service',
               '/etc/sglang/sglang-guard.json', '/usr/local/lib/llmops-sglang/sglang-guard')


def deploy(node, work, name, guard):
    """The deploy playbook (-vvv) with sglang_service_guard GUARD; returns (process, rows of the report, guard runs,
    the modules run in order)."""
    report = os.path.join(str(work), 'report-%s.json' % name)
    extra = {
        'sglang_deploy_hosts': 'all', 'nvidia_driver_enabled': False, 'sglang_service_version': '0.5.9',
        'sglang_service_pip_extra_args': ['--no-deps', '--no-compile'], 'sglang_service_wheelhouse': node['wheelhouse'],
        'sglang_service_args': {'model-path': 'zai-org/GLM-5-FP8', 'tp-size': 8},
        'sglang_service_wait_timeout': 60, 'sglang_service_stall_timeout': 30,
        # the recordings crash before ready or stay up: a 2 s stability window proves the start as well as the
        # role's 15 s default, 13 s sooner per deploy
        'sglang_service_stable_for': 2,
        'sglang_service_launch_command': ['/usr/bin/python3', '/opt/llmops-standin/sglang_standin.py', '--max-seconds', '2',
                                          '--recording', '/opt/llmops-standin/recordings/rocm-tp2-multimodal-ready-no-cuda-graph'],
        'sglang_report_path': report, 'sglang_service_guard': guard,
    }
    vars_file = os.path.join(str(work), 'vars-%s.json' % name)
    with open(vars_file, 'w', encoding='utf-8') as handle:
        json.dump(extra, handle)
    proc = fh.run_playbook(node, 'llmops.sglang.deploy', extra=['-e', '@' + vars_file, '-vvv'])
    assert proc.returncode == 0 and os.path.exists(report), proc.stdout[-4000:] + proc.stderr[-2000:]
    with open(report, encoding='utf-8') as handle:
        rows = json.load(handle)
    modules = [line.rstrip().rsplit('/', 1)[-1] for line in proc.stdout.splitlines() if 'Using module file' in line]
    return proc, rows, modules.count('sglang_guard.py'), modules


def present(node):
    done = fh.ssh(node, 'for f in %s; do [ -e "$f" ] && echo "$f"; done; true' % ' '.join(GUARD_FILES))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def invocation(node):
    done = fh.ssh(node, 'systemctl show sglang.service -p InvocationID --value')
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_guard_off_runs_sglang_guard_only_where_a_guard_is_installed(tmp_path):
    with fh.sglang_host(NODE, tmp_path) as node:
        proc, rows, guard_runs, modules = deploy(node, tmp_path, 'first-off', False)
        assert [(r['host'], r['status']) for r in rows] == [(NODE, 'ready')]
        # the first start is a restart (a new unit file): sglang_restart alone, nothing around it
        assert modules.count('sglang_restart.py') == 1, modules
        assert not {'command.py', 'systemd_service.py', 'sglang_run_offset.py'} & set(modules), modules
        # the wheelhouse sent without the copy action's stat of each file (the no-change query saw it missing)
        assert 'stat.py' not in modules and modules.count('copy.py') == len(os.listdir(node['wheelhouse'])), modules
        modes = fh.ssh(node, 'stat -c "%a %U" /opt/sglang/wheelhouse /opt/sglang/wheelhouse/*.whl')
        assert modes.stdout.split('\n')[:2] == ['755 root', '644 root'], modes.stdout
        assert guard_runs == 0, 'a first deploy with the guard off ran sglang_guard'
        assert present(node) == []
        # the compile caches made in the layout's run (no sglang_compile_cache run), owned by the service user, and
        # the environment file pointing at them
        assert modules.count('sglang_service_layout.py') == 1 and 'sglang_compile_cache.py' not in modules, modules
        caches = fh.ssh(node, 'stat -c "%n %U %a" /var/cache/sglang/0.5.9/triton; grep ^TRITON_CACHE_DIR= /etc/sglang/sglang.env')
        want = ['/var/cache/sglang/0.5.9/triton sglang 750', 'TRITON_CACHE_DIR="/var/cache/sglang/0.5.9/triton"']
        assert caches.stdout.split('\n')[:2] == want, caches.stdout

        proc, rows, guard_runs, _modules = deploy(node, tmp_path, 'on', True)
        assert guard_runs == 1 and present(node) == list(GUARD_FILES), proc.stdout[-3000:]
        served = invocation(node)

        # the guard's settings are no input of the server: this run is a no-change one, and it removes the guard
        proc, rows, guard_runs, _modules = deploy(node, tmp_path, 'off', False)
        assert [(r['host'], r['status'], r['kind']) for r in rows] == [(NODE, 'ready', 'unchanged')], rows
        assert guard_runs == 1 and fh.recap_changed(proc.stdout, NODE) == 1
        assert present(node) == [] and invocation(node) == served
        assert fh.ssh(node, 'systemctl is-enabled sglang-guard.timer').returncode != 0

        proc, rows, guard_runs, _modules = deploy(node, tmp_path, 'off-again', False)
        assert guard_runs == 0 and fh.recap_changed(proc.stdout, NODE) == 0
        assert invocation(node) == served
