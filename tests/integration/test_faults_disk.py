# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A full disk at each write of a deploy of the sglang_service role that could change what runs: the SM120 patch, the
unit file and the deployment record. Real ansible-playbook, real SSH to one systemd-nspawn host (tests/infra/fleet.sh),
real systemd, the SGLang stand-in replaying a recorded start; the full disk is a real tmpfs mounted over the directory
the file is written in (in the host's mount namespace), holding a copy of that directory, filled to its last block.

Each case asserts the failed task's structured result (``no_space``: path, free and needed bytes), the file bytes
(as they were), and the unit (active, the same InvocationID: nothing stopped or restarted). One host for the module:
the first deploy makes a ready server, each case leaves it as it found it (docs/reliability.md).

Run: PYTHONPATH=<dir above ansible_collections> LLMOPS_FLEET_DIR=... python -m pytest tests/integration/test_faults_disk.py
(LLMOPS_FULLDISK_HOST names the test host; default fulldisk<pid>).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position
import ansible_collections.llmops.sglang as collection  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import human_bytes  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._sm120_patch import PATCH_FILES  # noqa: E402  pylint: disable=wrong-import-position

COLLECTIONS_PATH = os.path.dirname(os.path.dirname(os.path.dirname(list(collection.__path__)[0])))
UNIT = '/etc/systemd/system/sglang.service'
STAMP = '/var/lib/sglang/sglang.deployed.json'
READY = 'rocm-tp2-multimodal-ready-no-cuda-graph'
FILLER = '.llmops-filler'

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='systemd-nspawn test hosts need root'),
    pytest.mark.skipif(not shutil.which('systemd-nspawn'), reason='needs systemd-container (tests/infra/fleet.sh deps)'),
    pytest.mark.xdist_group('test_faults_disk'),  # the file on one worker: its module-scoped set-up runs once (docs/testing.md)
]

# The rescue keeps what failed (the role's result names the part of its step and the failed module's result) for the
# test, then fails the host as the deploy did: the play ends as a user's would.
PLAY = '''\
- name: Deploy SGLang ({tag})
  hosts: all
  become: true
  gather_facts: true
  vars:
    sglang_service_version: "0.5.9"
    sglang_service_pip_extra_args: [--no-deps, --no-compile]
    sglang_service_wheelhouse: {wheelhouse}
    sglang_service_args: {{model-path: zai-org/GLM-5-FP8, served-model-name: glm-5}}
    sglang_service_wait_timeout: 120
    sglang_service_stable_for: 0        # no crash to catch here; 15 s less per deploy
    sglang_service_launch_command: [/usr/bin/python3, /opt/llmops-standin/sglang_standin.py, --max-seconds, "4",
                                    --recording, /opt/llmops-standin/recordings/{recording}]
  tasks:
    - name: Deploy and keep the failed task's result
      block:
        - name: Deploy
          ansible.builtin.include_role:
            name: llmops.sglang.sglang_service
      rescue:
        - name: Write the failed task and its result for the test
          ansible.builtin.copy:
            content: "{{{{ {{'task': __failure.what, 'result': __failure.result | combine({{'msg': __failure.msg}})}} | to_json }}}}"
            dest: {out}
            mode: "0600"
          vars:
            __failure: "{{{{ sglang_service_result.failure }}}}"
          delegate_to: localhost
        - name: Fail as the deploy did
          ansible.builtin.fail:
            msg: "{{{{ ansible_failed_result.msg }}}}"
'''


def deploy(node, tag, **extra):
    out = os.path.join(node['work'], '%s.json' % tag)
    path = os.path.join(node['work'], '%s.yml' % tag)
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(PLAY.format(tag=tag, wheelhouse=node['wheelhouse'], out=out, recording=READY))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_PATH, ANSIBLE_NOCOLOR='1', ANSIBLE_HOST_KEY_CHECKING='False')
    argv = [fh.ANSIBLE_PLAYBOOK, '-i', node['inventory'], path, '-e', 'ansible_python_interpreter=/usr/bin/python3']
    for key, value in extra.items():
        argv += ['-e', '%s=%s' % (key, value)]
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                          check=False)
    try:
        with open(out, encoding='utf-8') as handle:
            failed = json.load(handle)
    except (OSError, ValueError):
        failed = None
    return {'rc': done.returncode, 'log': done.stdout, 'failed': failed}


def remote(node, command):
    done = fh.ssh(node, command)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def unit_state(node):
    text = remote(node, 'systemctl show sglang.service -p InvocationID -p ActiveState -p NRestarts')
    return dict(line.split('=', 1) for line in text.splitlines() if '=' in line)


def digests(node, paths):
    """sha256 of each path that exists (as the host's processes see it now)."""
    text = remote(node, 'for f in %s; do [ -e "$f" ] && sha256sum "$f"; done; true' % ' '.join(paths))
    return {line.split()[1]: line.split()[0] for line in text.splitlines()}


def free_bytes(node, directory):
    return int(remote(node, "stat -f -c '%%a %%S' %s | awk '{print $1 * $2}'" % directory))


@contextlib.contextmanager
def full_disk(node, directory, leave_kib=0):
    """A tmpfs over ``directory`` holding a copy of it, then filled but for ``leave_kib``: a write there that needs
    more fails with ENOSPC while every file reads as before. Yields the free bytes; unmounted on exit (the files
    underneath were never touched)."""
    script = '''set -e
d=%s
src=$(mktemp -d /run/llmops-full.XXXXXX)
cp -a "$d"/. "$src"/
kb=$(( $(du -sk "$src" | cut -f1) + 64 ))
mount -t tmpfs -o "size=${kb}k,mode=$(stat -c %%a "$d"),uid=$(stat -c %%u "$d"),gid=$(stat -c %%g "$d")" llmops-full "$d"
cp -a "$src"/. "$d"/
rm -rf "$src"
dd if=/dev/zero of="$d/%s" bs=4k 2>/dev/null || true
truncate -s -%dK "$d/%s"
''' % (directory, FILLER, leave_kib, FILLER)
    done = fh.nsenter(node, script)
    assert done.returncode == 0, done.stderr
    try:
        yield free_bytes(node, directory)
    finally:
        fh.nsenter(node, 'umount %s' % directory)


def assert_fails_for_space(run, task, path, free, needed=None):
    """The failed task is ``task``; its result names ``path``, the free bytes and the needed bytes."""
    assert run['rc'] == 2, run['log'][-4000:]
    assert run['failed'] is not None and run['failed']['task'] == task, run['log'][-4000:]
    result = run['failed']['result']
    got = result['no_space']
    assert (got['path'], got['free']) == (path, free)
    assert got['needed'] > free
    if needed is not None:
        assert got['needed'] == needed
    assert ('no space left on the file system of %s: %s free, %s needed to write it; it was left as it was. '
            'Free space there and run again' % (path, human_bytes(free), human_bytes(got['needed']))) in result['msg']
    return result


@pytest.fixture(scope='module')
def node(tmp_path_factory):
    name = os.environ.get('LLMOPS_FULLDISK_HOST') or 'fulldisk%d' % (os.getpid() % 100000)
    with fh.sglang_host(name, tmp_path_factory.mktemp('fulldisk')) as host:
        first = deploy(host, 'first')
        assert first['rc'] == 0, first['log'][-4000:]
        package = remote(host, '/opt/sglang/venv/bin/python -c "import importlib.util, os; '
                               'print(os.path.dirname(importlib.util.find_spec(\'sglang\').origin))"')
        host['patch_files'] = [os.path.join(package, rel) for rel in PATCH_FILES]
        yield host


def test_a_full_disk_at_the_unit_write_keeps_the_old_unit_and_the_server(node):
    before = remote(node, 'cat %s' % UNIT) + '\n'
    hashes, serving = digests(node, [UNIT]), unit_state(node)
    assert serving['ActiveState'] == 'active'
    with full_disk(node, os.path.dirname(UNIT)) as free:
        # RestartSec=10 -> 11: the new unit has as many bytes as the old one
        run = deploy(node, 'full-unit', sglang_service_restart_sec=11)
        assert_fails_for_space(run, 'unit file', UNIT, free, needed=len(before.encode('utf-8')))
        assert digests(node, [UNIT]) == hashes
        assert FILLER in remote(node, 'ls -A %s' % os.path.dirname(UNIT)).split()
        assert not [n for n in remote(node, 'ls -A %s' % os.path.dirname(UNIT)).split() if n.endswith('.tmp')]
    assert unit_state(node) == serving


def test_a_full_disk_at_the_sm120_patch_write_keeps_the_released_source_and_the_server(node):
    """SGLang 0.5.9's patch changes srt/layers/communicator.py (35 KiB), then srt/server_args.py (244 KiB): with 64 KiB
    left on srt's file system the first fits, the second does not, and the first is written back to its old text."""
    hashes, serving = digests(node, node['patch_files']), unit_state(node)
    layers, server_args = (next(p for p in hashes if p.endswith(rel)) for rel in ('/layers/communicator.py', '/server_args.py'))
    with full_disk(node, os.path.dirname(server_args), leave_kib=64) as free:
        run = deploy(node, 'full-patch', sglang_service_sm120_patch='present')
        result = assert_fails_for_space(run, 'SM120 patches present', server_args, free)
        assert (result['files_restored'], result['rollback_errors']) == ([layers], [])
        assert digests(node, node['patch_files']) == hashes      # every file in its released text
    assert unit_state(node) == serving


def test_a_full_disk_at_the_deployment_record_keeps_the_old_record_and_the_server(node):
    hashes, serving = digests(node, [STAMP]), unit_state(node)
    # an input that changes no file: a full deploy that restarts nothing, then writes the record (history off: the
    # record is the only file this deploy writes in the working directory). The pre-flight's free-space floor is
    # lowered: it would refuse this deploy before anything is written (the disk fills during a long start instead).
    change = dict(sglang_sm120_patch_backup='true', sglang_service_history='false', sglang_service_preflight_min_free_gb=0)
    with full_disk(node, os.path.dirname(STAMP)) as free:
        run = deploy(node, 'full-record', **change)
        result = assert_fails_for_space(run, 'deployment record', STAMP, free)
        assert digests(node, [STAMP]) == hashes
    assert unit_state(node) == serving
    # with the space back, the same deploy writes the record it could not write (as many bytes as it needed) and
    # still restarts nothing
    rerun = deploy(node, 'record-rerun', **change)
    assert rerun['rc'] == 0, rerun['log'][-4000:]
    assert int(remote(node, 'stat -c %%s %s' % STAMP)) == result['no_space']['needed']
    assert unit_state(node) == serving
