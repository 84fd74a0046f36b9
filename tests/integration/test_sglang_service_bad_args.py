# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Role level, through the real deploy playbook over SSH to a systemd-nspawn host: a misspelled server flag and a value
SGLang's argparse would refuse fail before anything is touched, with the message that names the mistake, in the
host's row of the end-of-run table.

The host first gets a good deploy (SGLang 0.5.9 from the PyPI wheel, the stand-in replaying a recorded ready start);
then each bad deploy must leave the unit file and the running server (its InvocationID) exactly as they were.

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_sglang_service_bad_args.py
Needs root (fleet.sh) and PyPI on the first run for the wheel (tests/sglang_wheels.py caches it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.llmops.sglang.plugins.plugin_utils._run_report import first_sentence  # noqa: E402

# pytest-xdist may run this module's tests on several workers, each with its own module fixture: one host per worker
NODE = 'svcargs-' + os.environ.get('PYTEST_XDIST_WORKER', 'gw')
GOOD_ARGS = {'model-path': 'zai-org/GLM-5-FP8', 'tp-size': 8, 'mem-fraction-static': 0.85, 'trust-remote-code': True}


# the file on one worker: its module-scoped set-up runs once (tests/run-all.sh: --dist loadgroup; docs/testing.md)
pytestmark = pytest.mark.xdist_group('test_sglang_service_bad_args')


def deploy(node, work, name, server_args, version='0.5.9', wheelhouse='wheelhouse', more=None):
    """The deploy playbook with SERVER_ARGS; returns (process, rows of the report)."""
    report = os.path.join(str(work), 'report-%s.json' % name)
    extra = {
        'sglang_deploy_hosts': 'all', 'nvidia_driver_enabled': False, 'sglang_service_version': version,
        'sglang_service_pip_extra_args': ['--no-deps', '--no-compile'], 'sglang_service_wheelhouse': os.path.join(str(work), wheelhouse),
        'sglang_service_args': server_args, 'sglang_service_wait_timeout': 60, 'sglang_service_stall_timeout': 30,
        'sglang_service_launch_command': ['/usr/bin/python3', '/opt/llmops-standin/sglang_standin.py', '--max-seconds', '2',
                                          '--recording', '/opt/llmops-standin/recordings/rocm-tp2-multimodal-ready-no-cuda-graph'],
        'sglang_report_path': report,
    }
    extra.update(more or {})
    vars_file = os.path.join(str(work), 'vars-%s.json' % name)
    with open(vars_file, 'w', encoding='utf-8') as handle:
        json.dump(extra, handle)
    proc = fh.run_playbook(node, 'llmops.sglang.deploy', extra=['-e', '@' + vars_file])
    assert os.path.exists(report), proc.stdout[-4000:] + proc.stderr[-2000:]
    with open(report, encoding='utf-8') as handle:
        return proc, json.load(handle)


def server_state(node):
    """What a bad deploy must not touch: the unit file, the env file and the running server's invocation."""
    done = fh.ssh(node, 'cat /etc/systemd/system/sglang.service /etc/sglang/sglang.env; systemctl show sglang.service -p InvocationID,ActiveState')
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope='module')
def good(tmp_path_factory):
    work = tmp_path_factory.mktemp('bad-args')
    with fh.sglang_host(NODE, work) as node:
        proc, rows = deploy(node, work, 'good', GOOD_ARGS)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert [(r['host'], r['status']) for r in rows] == [(NODE, 'ready')]
        yield node, work, server_state(node)


@pytest.mark.parametrize('name, bad, reason', [
    ('misspelled-flag', {'mem-fraction-statc': 0.85},
     'the installed SGLang 0.5.9 does not define this flag: --mem-fraction-statc (did you mean --mem-fraction-static?)'),
    ('bad-value', {'tp-size': 'eight'}, "--tp-size expects an integer, not 'eight' (sglang/srt/server_args.py:"),
])
def test_bad_server_args_fail_before_anything_is_touched(good, name, bad, reason):
    node, work, before = good
    args = dict(GOOD_ARGS)
    if 'mem-fraction-statc' in bad:
        del args['mem-fraction-static']
    args.update(bad)
    proc, rows = deploy(node, work, name, args)
    assert proc.returncode != 0
    (row,) = rows
    assert (row['host'], row['status'], row['stage'], row['changed']) == (NODE, 'failed', 'before start', False)
    assert row['reason'].startswith(reason), row['reason']
    assert row['failed_task'] == 'server arguments'
    # the user sees the message itself (not a templating error), and the table once
    assert reason in proc.stdout and 'CapturedExceptionMarker' not in proc.stdout
    assert proc.stdout.count('HOST ') == 1
    # nothing touched: same unit, same environment, the same server still running
    assert server_state(node) == before
    assert fh.recap_changed(proc.stdout, NODE) == 0


@pytest.mark.parametrize('name, args, more, reason', [
    # a reviewer's port 70000 in sglang_service_args rewrote the unit of a serving host, which then could not bind
    ('port', dict(GOOD_ARGS, port=70000), {}, 'cannot listen there: port 70000 in sglang_service_args (give a port, 1-65535'),
    # a misspelled group started the host as a server of its own (rc 0)
    ('group', GOOD_ARGS, {'sglang_service_deployment_group': 'sglang_nodes'},
     'sglang_service_deployment_group=sglang_nodes is not a group of the inventory'),
])
def test_where_it_listens_and_its_group_are_refused_on_a_serving_host(good, name, args, more, reason):
    node, work, before = good
    proc, rows = deploy(node, work, name, args, more=more)
    assert proc.returncode != 0
    (row,) = rows
    assert (row['host'], row['status'], row['stage'], row['changed']) == (NODE, 'failed', 'before start', False)
    assert row['reason'].startswith(reason), row['reason']
    assert server_state(node) == before
    assert fh.recap_changed(proc.stdout, NODE) == 0


def test_a_version_that_is_not_there_names_what_is(good):
    node, work, before = good
    proc, rows = deploy(node, work, 'missing-version', GOOD_ARGS, version='0.5.99')
    assert proc.returncode != 0
    (row,) = rows
    assert (row['status'], row['stage'], row['failed_task']) == ('failed', 'before start', 'SGLang install')
    wheelhouse = os.path.join(str(work), 'wheelhouse')
    said = ('sglang 0.5.99 is not in the wheelhouse %s (copied to /opt/sglang/wheelhouse); it has 0.5.9: set '
            'sglang_service_version to one of them, or add its wheel to the wheelhouse (tests/infra/fleet.sh '
            'wheelhouse DIR sglang==VERSION)' % wheelhouse)
    assert said in proc.stdout  # where it failed, in full
    assert row['reason'] == first_sentence(said)  # the table's one line of it
    assert 'Could not find a version' not in proc.stdout  # pip's raw output stays in the returned data
    assert server_state(node) == before


def test_an_upgrade_with_a_misspelled_flag_is_refused_before_the_new_release_is_installed(good):
    # the flags were checked after the install: the new release was already in the running server's venv when the
    # deploy was refused (nothing restarted, but the server's package files were replaced under it)
    import sglang_wheels  # pylint: disable=import-outside-toplevel
    node, work, before = good
    both = os.path.join(str(work), 'wheelhouse-two-releases')
    os.makedirs(both, exist_ok=True)
    for version in ('0.5.9', '0.5.7'):
        shutil.copy(str(sglang_wheels.wheel_path(version)), both)
    args = dict(GOOD_ARGS, **{'mem-fraction-statc': 0.85})
    del args['mem-fraction-static']
    proc, rows = deploy(node, work, 'upgrade-misspelled', args, version='0.5.7', wheelhouse='wheelhouse-two-releases')
    assert proc.returncode != 0
    (row,) = rows
    assert (row['status'], row['stage'], row['failed_task'], row['changed']) == ('failed', 'before start', 'server arguments', False)
    assert row['reason'].startswith('SGLang 0.5.7 does not define this flag: --mem-fraction-statc'), row['reason']
    installed = fh.ssh(node, "/opt/sglang/venv/bin/python -c 'import importlib.metadata as m; print(m.version(\"sglang\"))'")
    assert installed.stdout.strip() == '0.5.9', installed.stdout + installed.stderr
    assert server_state(node) == before
    assert fh.recap_changed(proc.stdout, NODE) == 0
