# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""No false success: every playbook the collection ships, run by the real ansible-playbook with a host pattern that
matches no host (a wrong group name, a --limit that leaves none of the pattern's hosts, an empty inventory), fails
before anything runs, naming the pattern; with a pattern that matches, its play starts.

ansible-playbook alone skips such a play ("skipping: no hosts matched") and exits 0. Each play of playbooks/*.yml takes
its hosts through the llmops.sglang.play_hosts lookup; a playbook added later is held by the same tests.

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_playbooks_no_hosts.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import ansible_collections.llmops.sglang as collection

COLLECTIONS_PATH = os.path.dirname(os.path.dirname(os.path.dirname(list(collection.__path__)[0])))
PLAYBOOKS = sorted(p.stem for p in (Path(list(collection.__path__)[0]) / 'playbooks').glob('*.yml'))
ANSIBLE_PLAYBOOK = shutil.which('ansible-playbook', path=os.path.dirname(sys.executable)) or shutil.which('ansible-playbook')

# hosts no play reaches in these runs: the guard fails before any connection, and the one run that gets past it
# (test_a_matching_pattern_passes) stops at its first task, which needs no connection
INVENTORY = {'all': {'children': {'gpu': {'hosts': {'gpu1': {'ansible_host': '192.0.2.1'}, 'gpu2': {'ansible_host': '192.0.2.2'}}}}}}


def run(tmp_path, name, *args, inventory=True):
    inv = tmp_path / 'inventory.yml'
    inv.write_text(yaml.safe_dump(INVENTORY))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_PATH, ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0',
               ANSIBLE_HOST_KEY_CHECKING='False', ANSIBLE_TIMEOUT='2', ANSIBLE_SSH_RETRIES='0',
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_RETRY_FILES_ENABLED='False')
    cmd = [ANSIBLE_PLAYBOOK, 'llmops.sglang.%s' % name] + (['-i', str(inv)] if inventory else []) + list(args)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False, cwd=str(tmp_path))
    return proc.returncode, proc.stdout + proc.stderr


# the variable that sets each playbook's host pattern, and its default (a group the test inventory does not have)
PATTERNS = {'tune': ('sglang_tune_hosts', 'sglang'), 'gateway': ('sglang_gateway_hosts', 'sglang_gateway'),
            'roll': ('sglang_roll_gateway_group', 'sglang_gateway')}


def var_of(name):
    return PATTERNS.get(name, ('sglang_deploy_hosts', 'sglang'))[0]


def test_every_playbook_is_covered():
    assert {'deploy', 'check', 'tune', 'gateway', 'roll'} <= set(PLAYBOOKS), PLAYBOOKS


@pytest.mark.parametrize('name', PLAYBOOKS)
def test_a_pattern_that_matches_no_host_fails(tmp_path, name):
    rc, out = run(tmp_path, name)  # the default pattern is not a group of the inventory
    assert rc != 0, out
    pattern = PATTERNS.get(name, ('sglang_deploy_hosts', 'sglang'))[1]
    assert "llmops.sglang.%s: the host pattern '%s' (%s) matches no host" % (name, pattern, var_of(name)) in out, out
    assert 'groups gpu' in out and 'Nothing was run' in out, out
    assert 'PLAY [' not in out and 'PLAY RECAP' not in out, out  # failed before any play started


# The same lookup guards every play (tests/unit/playbooks/test_play_hosts.py holds that); --limit and an empty
# inventory once each.
@pytest.mark.parametrize('name', ['deploy'])
def test_a_limit_that_leaves_none_of_the_pattern_fails(tmp_path, name):
    rc, out = run(tmp_path, name, '-e', '%s=gpu:!gpu2' % var_of(name), '--limit', 'gpu2')
    assert rc != 0, out
    assert "the host pattern 'gpu:!gpu2' (%s) matches no host: it selects 1 host (gpu1), and --limit leaves none" % var_of(name) in out, out
    assert 'PLAY RECAP' not in out, out


@pytest.mark.parametrize('name', ['check'])
def test_an_empty_inventory_fails(tmp_path, name):
    rc, out = run(tmp_path, name, inventory=False)
    assert rc != 0, out
    assert 'the inventory has no hosts' in out, out


def test_a_matching_pattern_passes(tmp_path):
    # the guard lets the play start on the hosts --limit leaves: the tune playbook's first task refuses check mode
    # before connecting to a host (they do not exist)
    rc, out = run(tmp_path, 'tune', '-e', 'sglang_tune_hosts=gpu', '--limit', 'gpu1', '--check')
    assert 'matches no host' not in out, out
    recap = out.split('PLAY RECAP')[1]
    assert 'PLAY [Tune SGLang]' in out and 'gpu1' in recap and 'gpu2' not in recap, out
    assert rc == 2 and 'It does not run in check mode' in out, out


def test_a_syntax_check_needs_no_inventory(tmp_path):
    # ansible-lint (and anyone) checks the playbooks' syntax without an inventory: nothing runs, nothing is matched
    rc, out = run(tmp_path, PLAYBOOKS[0], *['llmops.sglang.%s' % name for name in PLAYBOOKS[1:]], '--syntax-check',
                  inventory=False)
    assert rc == 0, out
    assert 'matches no host' not in out, out
