# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The llmops.sglang.nvidia_driver role through real ansible-playbook runs (connection local).

Covered here: argument validation from meta/argument_specs.yml, the report-only mode
(nvidia_driver_manage=false, what the demo fleet uses), the refusal of user-space-only mode without a
loaded module, and the flavor/source decision (the role's plan step, llmops.sglang.nvidia_driver_deploy) for GPU
architectures read from PCI device IDs and given as a variable (every other case of the decision is a unit test of the
pure plan, tests/unit/plugins/plugin_utils/test_nvidia_plan.py).  These runs never reach the install steps, so nothing
is installed on this machine.

Stand-in: this machine has no NVIDIA GPU, so for the PCI-ID cases an ``lspci`` placed first on PATH
prints ``lspci -n -d 10de:`` lines (format "BB:DD.F CCCC: VVVV:DDDD (rev RR)") with real device IDs:
2684 (GeForce RTX 4090, https://github.com/geerlingguy/raspberry-pi-pcie-devices/issues/504) and
2c18 (GeForce RTX 5090 Laptop GPU, https://github.com/arutar/FrankenDriver/issues/111), plus the HDMI
audio function 22ba of the same boards (class 0403) that must be ignored.

The install, hold and reboot steps need package repositories with NVIDIA drivers and a host of its
own; they are exercised by the fix-mode test host (see tests/integration/test_nvidia_fix_apt.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position

COLLECTIONS = fh.COLLECTIONS
ANSIBLE_PLAYBOOK = os.environ.get('ANSIBLE_PLAYBOOK', os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'))
TARGET_PYTHON = os.environ.get('LLMOPS_TARGET_PYTHON', '/usr/bin/python3')

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(COLLECTIONS, 'ansible_collections', 'llmops', 'sglang')),
                                reason='collection not found under %s (set LLMOPS_COLLECTIONS_PATH)' % COLLECTIONS)


def play(tmp_path, tasks, extra_vars=None, lspci=None):
    out = tmp_path / 'facts.json'
    playbook = tmp_path / 'play.yml'
    playbook.write_text(textwrap.dedent('''\
        - hosts: localhost
          gather_facts: true
          tasks:
        %s
            - name: Write what the role decided (its one result)
              ansible.builtin.copy:
                content: "{{ {'result': nvidia_driver_result | default(none), 'flavor': __plan.flavor | default(none),
                              'source': __plan.source | default(none), 'archs': __plan.archs | default(none),
                              'branch': __plan.branch | default(none)} | to_json }}"
                dest: %s
                mode: "0600"
              vars:
                __plan: "{{ (nvidia_driver_result | default({})).plan | default({}, true) }}"
        ''') % (textwrap.indent(textwrap.dedent(tasks), '    '), out))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0')
    if lspci is not None:
        bindir = tmp_path / 'bin'
        bindir.mkdir()
        (bindir / 'lspci').write_text('#!/bin/sh\ncat <<"EOF"\n%sEOF\n' % lspci)
        (bindir / 'lspci').chmod(0o755)
        env['PATH'] = '%s:%s' % (bindir, env.get('PATH', '/usr/bin:/bin'))
    argv = [ANSIBLE_PLAYBOOK, '-c', 'local', '-i', 'localhost,', '-e', 'ansible_python_interpreter=%s' % TARGET_PYTHON,
            '-e', json.dumps(extra_vars or {}), str(playbook)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    facts = json.loads(out.read_text()) if out.exists() else None
    return proc, facts


INCLUDE = '''\
- name: Run the role
  ansible.builtin.include_role:
    name: llmops.sglang.nvidia_driver
'''

# The role's plan step alone (the role would go on to install): its result, and its refusal as the role fails it.
DECIDE = '''\
- name: Run the role's plan step
  llmops.sglang.nvidia_driver_deploy:
    step: plan
  register: nvidia_driver_result

- name: Fail as the role does
  ansible.builtin.fail:
    msg: "{{ nvidia_driver_result.msg }}"
  when: nvidia_driver_result.failure is not none
'''


def test_report_only_never_fails_without_a_gpu(tmp_path):
    proc, facts = play(tmp_path, INCLUDE, {'nvidia_driver_manage': False})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert facts['result']['match'] is None
    assert facts['result']['kernel_module']['version'] is None
    assert 'NVIDIA driver (report only): no NVIDIA kernel module is loaded' in proc.stdout
    # Report-only mode decided nothing and installed nothing.
    assert facts['flavor'] is None and facts['result']['status'] == 'report'
    assert facts['result']['changed'] is False


def test_argument_spec_rejects_bad_values(tmp_path):
    proc, facts = play(tmp_path, INCLUDE, {'nvidia_driver_flavor': 'closed'})
    assert proc.returncode != 0
    assert 'nvidia_driver_flavor' in proc.stdout and 'open, proprietary' in proc.stdout


def test_userspace_only_without_a_loaded_module_fails_before_installing(tmp_path):
    proc, facts = play(tmp_path, INCLUDE, {'nvidia_driver_userspace_only': True})
    assert proc.returncode != 0
    assert 'nvidia_driver_userspace_only is true but no NVIDIA kernel module is visible' in proc.stdout
    assert 'Install and hold' not in proc.stdout


@pytest.mark.parametrize('extra, flavor', [
    ({'nvidia_driver_gpu_arch': 'blackwell', 'nvidia_driver_branch': '550'}, 'open'),      # Blackwell requires open
    ({'nvidia_driver_gpu_arch': 'ampere', 'nvidia_driver_version': '535.261.03'}, 'proprietary'),
])
def test_flavor_decision_from_the_arch_variable(tmp_path, extra, flavor):
    proc, facts = play(tmp_path, DECIDE, extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert facts['flavor'] == flavor
    assert facts['source'] == 'debian'  # this controller is Debian 12
    assert facts['archs'] == [extra['nvidia_driver_gpu_arch']]
    if 'nvidia_driver_version' in extra:
        assert facts['branch'] == extra['nvidia_driver_version'].split('.')[0]


def test_blackwell_with_proprietary_is_refused(tmp_path):
    proc, facts = play(tmp_path, DECIDE, {'nvidia_driver_gpu_arch': 'blackwell', 'nvidia_driver_flavor': 'proprietary'})
    assert proc.returncode != 0
    assert 'Blackwell needs the open kernel modules' in proc.stdout


def test_ubuntu_source_on_debian_is_refused(tmp_path):
    proc, facts = play(tmp_path, DECIDE, {'nvidia_driver_gpu_arch': 'hopper', 'nvidia_driver_source': 'ubuntu'})
    assert proc.returncode != 0
    assert 'source ubuntu' in proc.stdout


LSPCI_ADA = '01:00.0 0300: 10de:2684 (rev a1)\n01:00.1 0403: 10de:22ba (rev a1)\n'
LSPCI_MIXED = LSPCI_ADA + '02:00.0 0300: 10de:2c18 (rev a1)\n'


def test_flavor_from_pci_ids_ada(tmp_path):
    proc, facts = play(tmp_path, DECIDE, {'nvidia_driver_branch': '550'}, lspci=LSPCI_ADA)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert facts['archs'] == ['ada']
    assert facts['flavor'] == 'proprietary'


def test_flavor_from_pci_ids_blackwell_wins(tmp_path):
    proc, facts = play(tmp_path, DECIDE, {'nvidia_driver_branch': '550'}, lspci=LSPCI_MIXED)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert facts['archs'] == ['ada', 'blackwell']
    assert facts['flavor'] == 'open'


def test_no_lspci_output_falls_back_to_the_branch_rule(tmp_path):
    proc, facts = play(tmp_path, DECIDE, {'nvidia_driver_branch': '580'}, lspci='')
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert facts['archs'] == []
    assert facts['flavor'] == 'open'
