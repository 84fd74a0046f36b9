# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's roles inside someone else's play: tests/embed/, an infrastructure repository of the test suite's own
(a role with a task and a handler, and a play that includes nvidia_driver, sglang_service, sglang_sm120_patch and
sglang_gateway among its own tasks; the gateway, the real smg release from a wheelhouse, in front of the host's own
SGLang stand-in), on a systemd-nspawn test host over SSH.

Holds: after the roles, the caller's variables are its own plus the roles' documented results (nvidia_driver_result,
sglang_service_result, sglang_sm120_patch_result, sglang_gateway_result), none of the roles' defaults or internals; the play's own pending
handler fires once, after every role (no role flushes the caller's handlers); and the same play with --check on the
fresh host changes nothing on it (a snapshot of its whole file system before and after, in the same run).

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_embedding.py   (root)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / 'infra'))
import fs_snapshot  # noqa: E402  pylint: disable=wrong-import-position
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position

NODE = os.environ.get('LLMOPS_EMBED_NODE') or 'embed-' + os.environ.get('PYTEST_XDIST_WORKER', 'gw')
# The SGLang model gateway and its dependencies for the hosts' Python 3.11 (extensions/molecule/shared/gateway_wheelhouse.yml)
GATEWAY_WHEELS = ['smg==1.13.0', 'setproctitle==1.3.8', 'grpcio==1.85.3', 'grpcio-health-checking==1.85.1', 'protobuf==7.36.2',
                  'pyyaml==6.0.4', 'typing_extensions==4.16.0']
SMG_WHEEL = 'smg-1.13.0-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl'
EMBED = TESTS / 'embed'
# Ansible's own temporary files (module payloads, its remote temporary directory) go to root's per-login runtime
# directory, which the snapshot leaves out with /proc, /sys and /dev: they are the transport's, not the roles'.
INVENTORY_VARS = '''\
all:
  vars:
    ansible_remote_tmp: /run/user/0/.ansible/tmp
    sglang_service_version: "0.5.9"
    sglang_service_pip_extra_args: [--no-deps, --no-compile]
    sglang_service_wheelhouse: "%s"
    sglang_gateway_wheelhouse: "%s"
    sglang_service_args: {model-path: zai-org/GLM-5-FP8, tp-size: 8}
    sglang_service_launch_command: [/usr/bin/python3, /opt/llmops-standin/sglang_standin.py, --max-seconds, "2",
                                    --recording, /opt/llmops-standin/recordings/rocm-tp2-multimodal-ready-no-cuda-graph]
'''


# the file on one worker: its module-scoped set-up runs once (tests/run-all.sh: --dist loadgroup; docs/testing.md)
pytestmark = pytest.mark.xdist_group('test_embedding')


def gateway_wheelhouse():
    """The fleet directory's gateway wheelhouse (the molecule scenarios' too), downloaded once on the controller."""
    dest = os.path.join(fh.fleet_dir(), 'gateway-wheelhouse')
    if not os.path.exists(os.path.join(dest, SMG_WHEEL)):
        done = fh.run([fh.FLEET, 'wheelhouse', dest, '--only-binary=:all:', '--platform', 'manylinux2014_x86_64', '--python-version', '3.11']
                      + GATEWAY_WHEELS)
        assert done.returncode == 0, done.stderr[-3000:]
    return dest


@pytest.fixture(scope='module')
def embed_host(tmp_path_factory):
    work = tmp_path_factory.mktemp('embed')
    with fh.sglang_host(NODE, work) as node:
        done = fh.ssh(node, 'echo TMPDIR=/run/user/0 >> /etc/environment')  # for the SSH sessions that come (pam_env)
        assert done.returncode == 0, done.stderr
        inventory = work / 'role-vars.yml'
        inventory.write_text(INVENTORY_VARS % (node['wheelhouse'], gateway_wheelhouse()))
        yield node, work, inventory


def play(node, inventory, playbook, check_mode=False, extra=()):
    os.environ['ANSIBLE_NO_TARGET_SYSLOG'] = 'true'
    try:
        return fh.run_playbook(node, playbook, check_mode=check_mode, extra=['-i', str(inventory)] + list(extra))
    finally:
        os.environ.pop('ANSIBLE_NO_TARGET_SYSLOG', None)


def test_a_dry_run_of_the_infra_play_changes_nothing_on_the_fresh_host(embed_host):
    node, work, inventory = embed_host
    proc = play(node, inventory, EMBED / 'check.yml', check_mode=True, extra=['-e', 'fs_snapshot_dir=%s' % work])
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:] + proc.stderr[-2000:]
    assert '%s: would deploy: no deployment record yet' % NODE in out
    assert '(would start; dry run, check mode: nothing was changed)' in out, out[-5000:]
    # the infra play's own assertions ran: nothing but the documented results left, the handler at the end
    assert 'What the roles left is their documented results' in out and 'The handler fired after every role of the play' in out
    # the play's last task compared them (a difference fails the run); the same comparison here, from the files it kept:
    # what the transport writes (the journal's files, logind's session records) is left out, as there (a raw equality
    # failed once in a verifying run on the journal file's modification time alone)
    before, after = (json.loads((work / ('%s-%s.json' % (name, NODE))).read_text()) for name in ('before', 'after'))
    assert fs_snapshot.compare(before, after) == [] and len(before) > 5000


def test_the_infra_play_embeds_every_role_without_leaks_or_early_handlers(embed_host):
    node, work, inventory = embed_host
    first = play(node, inventory, EMBED / 'site.yml')
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-2000:]
    assert '%s: restarting sglang.service' % NODE in first.stdout
    assert '1 worker(s) in rotation (started); request through it answered in' in first.stdout, first.stdout[-5000:]
    again = play(node, inventory, EMBED / 'site.yml')
    assert again.returncode == 0, again.stdout[-5000:]
    assert '%s: unchanged since' % NODE in again.stdout, again.stdout[-5000:]
    assert '1 worker(s) in rotation (not restarted)' in again.stdout, again.stdout[-5000:]
