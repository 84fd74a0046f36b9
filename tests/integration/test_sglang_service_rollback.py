# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Role level, through the real deploy playbook over SSH to a systemd-nspawn host: a failed start with
sglang_service_rollback puts back every configuration file the deploy replaced or removed (the API-key file of an
emptied key included) and removes the files it created, so the previous server starts again as it was; the next deploy
of the restored configuration is a no-change run (changed=0), the rollback having recorded the unit's new run.

Real: ansible-playbook, SSH, systemd in the host (LoadCredential= of the API-key file), SGLang 0.5.9 from the PyPI
wheel (the role's flag check). Stand-in: the server process (tests/standin/sglang_standin.py) replaying a recorded ready
start, or the recorded CUDA out-of-memory crash (rtx3090-oom-attention-workspace-at-graph-stage) for the failing deploy;
it enforces the API key as SGLang does (401 without ``Authorization: Bearer <key>``).

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_sglang_service_rollback.py
Needs root (fleet.sh) and PyPI on the first run for the wheel (tests/sglang_wheels.py caches it).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position

NODE = 'svcrb-' + os.environ.get('PYTEST_XDIST_WORKER', 'gw')
ARGS = {'model-path': 'zai-org/GLM-5-FP8', 'tp-size': 8, 'mem-fraction-static': 0.85}
READY = 'rocm-tp2-multimodal-ready-no-cuda-graph'
CRASH = 'rtx3090-oom-attention-workspace-at-graph-stage'
KEY_FILE = '/etc/sglang/sglang.secret-args.yaml'
FILES = ['/etc/systemd/system/sglang.service', '/etc/sglang/sglang.env', '/etc/sglang/sglang.secret.env', KEY_FILE]


def deploy(node, work, name, recording, api_key):
    """The deploy playbook with rollback on; returns the finished process."""
    extra = {
        'sglang_deploy_hosts': 'all', 'nvidia_driver_enabled': False, 'sglang_service_version': '0.5.9',
        'sglang_service_pip_extra_args': ['--no-deps', '--no-compile'], 'sglang_service_wheelhouse': os.path.join(str(work), 'wheelhouse'),
        'sglang_service_args': ARGS, 'sglang_service_wait_timeout': 60, 'sglang_service_stall_timeout': 30,
        # the recordings crash before ready or stay up: a 2 s stability window proves the start as well as the
        # role's 15 s default, 13 s sooner per deploy
        'sglang_service_stable_for': 2,
        'sglang_service_rollback': True, 'sglang_service_api_key': api_key,
        'sglang_service_launch_command': ['/usr/bin/python3', '/opt/llmops-standin/sglang_standin.py', '--max-seconds', '2',
                                          '--recording', '/opt/llmops-standin/recordings/' + recording],
        'sglang_report_path': os.path.join(str(work), 'report-%s.json' % name),
    }
    vars_file = os.path.join(str(work), 'vars-%s.json' % name)
    with open(vars_file, 'w', encoding='utf-8') as handle:
        json.dump(extra, handle)
    return fh.run_playbook(node, 'llmops.sglang.deploy', extra=['-e', '@' + vars_file])


def config_files(node):
    """{path: (mode, content) or None} of the files a deploy writes, and the configuration directory's names."""
    script = ('for f in %s; do if [ -e "$f" ]; then echo "== $f $(stat -c %%a "$f")"; cat "$f"; else echo "== $f absent"; fi; done; '
              'echo "== listing"; ls /etc/sglang' % ' '.join(FILES))
    done = fh.ssh(node, script)
    assert done.returncode == 0, done.stderr
    files, listing = {}, []
    for block in done.stdout.split('== ')[1:]:
        head, _sep, body = block.partition('\n')
        if head == 'listing':
            listing = body.split()
            continue
        path, state = head.rsplit(' ', 1)
        files[path] = None if state == 'absent' else (state, body)
    return files, listing


HTTP_STATUS = """
import sys, urllib.error, urllib.request
request = urllib.request.Request('http://127.0.0.1:30000/v1/models')
if len(sys.argv) > 1:
    request.add_header('Authorization', 'Bearer ' + sys.argv[1])
try:
    print(urllib.request.urlopen(request, timeout=10).status)
except urllib.error.HTTPError as exc:
    print(exc.code)
"""


def http_status(node, key=None):
    """The status of GET /v1/models on the server, with the key as a bearer token when given."""
    done = fh.ssh(node, "python3 -c %s %s" % (shlex.quote(HTTP_STATUS), key or ''))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def invocation(node):
    """The InvocationID of the server's unit run."""
    done = fh.ssh(node, 'systemctl show -P InvocationID sglang.service')
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def report(work, name):
    """The rows of the deploy's report (sglang_report_path)."""
    with open(os.path.join(str(work), 'report-%s.json' % name), encoding='utf-8') as handle:
        return json.load(handle)


@pytest.fixture(scope='module')
def host(tmp_path_factory):
    work = tmp_path_factory.mktemp('rollback')
    with fh.sglang_host(NODE, work) as node:
        yield node, work


def test_rollback_restores_the_removed_api_key_file_and_removes_a_created_one(host):
    node, work = host
    # 1. A server with an API key.
    first = deploy(node, work, 'with-key', READY, 'key-one-0123')
    assert first.returncode == 0, first.stdout[-4000:]
    before, listing = config_files(node)
    assert before[KEY_FILE] == ('600', 'api-key: key-one-0123\n')
    assert (http_status(node), http_status(node, 'key-one-0123')) == ('401', '200')

    # 2. The key emptied (the file is removed) together with a change that crashes: the rollback must put the file back,
    # or the previous unit, which loads it as a credential, cannot start.
    failed = deploy(node, work, 'key-emptied-crash', CRASH, '')
    assert failed.returncode != 0
    assert 'The new configuration failed' in failed.stdout and 'the previous configuration is ready' in failed.stdout, failed.stdout[-4000:]
    after, listing_after = config_files(node)
    assert after == before
    # Only Ansible's backups (NAME.<pid>.<time>~) were added to the directory; no kept copy is left.
    assert all(name.endswith('~') for name in set(listing_after) - set(listing)), listing_after
    assert 'sglang.secret-args.yaml.rollback' not in listing_after
    assert (http_status(node), http_status(node, 'key-one-0123')) == ('401', '200')
    # What the secret files hold never reaches the output.
    assert 'key-one-0123' not in failed.stdout + failed.stderr

    # 2b. The restored configuration deployed again (the inputs of 1.): the rollback recorded it with the unit's new run,
    # so nothing is done (breaker report of issue 21, finding 9: it was a full deploy, 'restarted since the deployment',
    # a second wait and changed=2).
    served = invocation(node)
    same = deploy(node, work, 'with-key-again', READY, 'key-one-0123')
    assert same.returncode == 0, same.stdout[-4000:]
    assert 'restarted since the deployment' not in same.stdout, same.stdout[-4000:]
    assert [(r['host'], r['status'], r['kind']) for r in report(work, 'with-key-again')] == [(NODE, 'ready', 'unchanged')], same.stdout[-4000:]
    assert fh.recap_changed(same.stdout, NODE) == 0, same.stdout[-4000:]
    assert invocation(node) == served

    # 3. The key emptied in a deploy that stands: the file is gone, and no copy of it is kept.
    open_server = deploy(node, work, 'no-key', READY, '')
    assert open_server.returncode == 0, open_server.stdout[-4000:]
    plain, listing = config_files(node)
    assert plain[KEY_FILE] is None and not any(name.startswith('sglang.secret-args.yaml') for name in listing), listing
    assert http_status(node) == '200'

    # 4. A key added (the file is created) together with a change that crashes: the rollback removes the file the
    # previous configuration did not have, and the previous server serves without a key again.
    failed = deploy(node, work, 'key-added-crash', CRASH, 'key-two-4567')
    assert failed.returncode != 0
    assert 'removed %s' % KEY_FILE in failed.stdout and 'the previous configuration is ready' in failed.stdout, failed.stdout[-4000:]
    again, listing = config_files(node)
    assert again == plain
    assert not any(name.startswith('sglang.secret-args.yaml') for name in listing), listing
    assert http_status(node) == '200'
    assert 'key-two-4567' not in failed.stdout + failed.stderr
