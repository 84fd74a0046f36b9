# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The llmops.sglang.brief stdout callback inside the real ansible-playbook (local connection, two hosts): what the
screen shows at verbosity 0, what the log file keeps, and that -v is ansible.builtin.default.

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_brief_callback.py
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import ansible_collections.llmops.sglang as collection

COLLECTIONS_PATH = os.path.dirname(os.path.dirname(os.path.dirname(list(collection.__path__)[0])))
ANSIBLE_PLAYBOOK = shutil.which('ansible-playbook', path=os.path.dirname(sys.executable)) or shutil.which('ansible-playbook')

PLAYBOOK = '''\
- name: Probe the screen
  hosts: all
  gather_facts: false
  tasks:
    - name: A task that changes something
      ansible.builtin.command: "true"
    - name: A message for every host
      ansible.builtin.debug:
        msg: "{{ inventory_hostname }}: restarting sglang.service: unit file"
    - name: A message for -v only
      ansible.builtin.debug:
        msg: only with -v
        verbosity: 1
    - name: A module that warns
      warns:
    - name: A failure that the play rescues, in an included file
      block:
        - name: Include the failing task
          ansible.builtin.include_tasks: failing.yml
      rescue:
        - name: Note the failure
          ansible.builtin.set_fact:
            noted: "{{ ansible_failed_result.msg }}"
    - name: An ignored failure
      ansible.builtin.fail:
        msg: ignored
      ignore_errors: true
    - name: A meta task, decided per host on the controller
      ansible.builtin.meta: end_host
      when: false
    - name: A table, once
      ansible.builtin.debug:
        msg: "HOST  STATUS\\nh1    ready\\nh2    crashed"
      run_once: true
    - name: Fail the hosts that are not serving
      ansible.builtin.fail:
        msg: not serving; its row in the table above says why
      when: inventory_hostname == 'h2' or fail_both | default(false) | bool
'''

FAILING = '''\
- name: Stop when SGLang did not become ready
  ansible.builtin.fail:
    msg: "crashed at stage cuda_graph: cuda_oom\\nthe whole log tail"
'''

WARNS = '''\
#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule(argument_spec={})
module.warn('SM120 FlashInfer allreduce fusion is enabled')
module.exit_json(changed=False)
'''


@pytest.fixture(scope='module')
def probe(tmp_path_factory):
    work = tmp_path_factory.mktemp('brief')
    (work / 'library').mkdir()
    (work / 'library' / 'warns.py').write_text(WARNS)
    (work / 'probe.yml').write_text(PLAYBOOK)
    (work / 'failing.yml').write_text(FAILING)
    (work / 'inventory.ini').write_text(textwrap.dedent('''\
        h1 ansible_connection=local ansible_python_interpreter={py}
        h2 ansible_connection=local ansible_python_interpreter={py}
        ''').format(py=sys.executable))
    return work


def run(work, *args, log=None):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_PATH, ANSIBLE_STDOUT_CALLBACK='llmops.sglang.brief',
               ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0', ANSIBLE_LOCAL_TEMP=str(work / 'tmp'), ANSIBLE_FORKS='1',
               ANSIBLE_RETRY_FILES_ENABLED='False')
    env.pop('ANSIBLE_LOG_PATH', None)
    if log:
        env['ANSIBLE_LOG_PATH'] = str(log)
    proc = subprocess.run([ANSIBLE_PLAYBOOK, '-i', 'inventory.ini', 'probe.yml'] + list(args), cwd=str(work), env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines()


def test_verbosity_0_is_one_line_per_host_per_event(probe):
    rc, out, err = run(probe, log=probe / 'ansible.log')
    assert rc == 2
    recap = out.index('PLAY RECAP')
    assert out[:recap] == [
        'PLAY [Probe the screen]',
        'h1: restarting sglang.service: unit file',
        'h2: restarting sglang.service: unit file',
        # the rescued failure (the play's own business) and the ignored one are not on the screen
        'HOST  STATUS',
        'h1    ready',
        'h2    crashed',
        # one line for the failed hosts, once
        'failed: [h2] Fail the hosts that are not serving: not serving; its row in the table above says why',
    ]
    # the recap as ansible.builtin.default prints it, without the blank lines around it
    assert [line.split()[0] for line in out[recap + 1:]] == ['h1', 'h2']
    assert re.match(r'h2 +: ok=\d+ +changed=1 +unreachable=0 +failed=1 +skipped=\d+ +rescued=1 +ignored=1', out[recap + 2])
    # a module's warning reaches the screen once, however many hosts raised it
    assert err == ['[WARNING]: SM120 FlashInfer allreduce fusion is enabled']


def test_the_log_keeps_what_the_default_callback_prints(probe):
    log = probe / 'full.log'
    run(probe, log=log)
    text = log.read_text()
    for expected in ('TASK [A task that changes something]', 'changed: [h1]', 'TASK [Stop when SGLang did not become ready]',
                     'fatal: [h1]: FAILED!', 'crashed at stage cuda_graph: cuda_oom', '...ignoring', 'skipping: [h1]',
                     'included: ', 'PLAY RECAP'):
        assert expected in text, expected
    # one header per task, also for a meta task (ansible-core starts it once per host)
    assert text.count('TASK [A meta task, decided per host on the controller]') == 1
    assert text.count('TASK [A task that changes something]') == 1
    # what went to the screen only (the brief lines) is not logged twice
    assert text.count('restarting sglang.service') == 2  # the two debug results, as the default callback shows them


def test_two_hosts_failing_alike_share_one_line(probe):
    rc, out, _err = run(probe, '-e', 'fail_both=true')
    assert rc == 2
    assert [line for line in out if line.startswith('failed:')] == [
        'failed: [h1, h2] Fail the hosts that are not serving: not serving; its row in the table above says why']


def test_with_v_it_is_the_default_callback(probe):
    _rc, out, _err = run(probe, '-v')
    text = '\n'.join(out)
    assert 'TASK [A task that changes something] ***' in text and 'changed: [h1]' in text
    assert 'fatal: [h1]: FAILED!' in text and '"msg": "only with -v"' in text
