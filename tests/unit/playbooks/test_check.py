# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The check playbook's rows (llmops.sglang.sglang_run_report kind=check) for results of llmops.sglang.wait_for_sglang
in check mode, llmops.sglang.nvidia_driver_match and llmops.sglang.sglang_patch_sm120."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible.parsing.dataloader import DataLoader

from ansible_collections.llmops.sglang.plugins.plugin_utils._run_rows import CHECK_PARTS, build_row

PLAYBOOK = Path(__file__).resolve().parents[3] / 'playbooks' / 'check.yml'


def _http(status, error=None):
    return {'url': 'http://127.0.0.1:30000',
            'health': {'url': 'http://127.0.0.1:30000/health', 'status': status, 'error': error,
                       'refused': error == 'Connection refused', 'elapsed_ms': 2.0}}


def check_row(**facts):
    return build_row('node1', facts, CHECK_PARTS, reached=True).to_json()


@pytest.mark.parametrize('check_ready, status, stage, reason', [
    # serving before any startup line was read: no stage (start says nothing), the /health answer is what is known
    ({'status': 'ready', 'stage': 'start', 'http': _http(200), 'elapsed': 0.0}, 'ready', None, 'GET /health 200'),
    ({'status': 'ready', 'stage': None, 'http': _http(200)}, 'ready', None, 'GET /health 200'),
    ({'status': 'ready', 'stage': 'ready', 'http': _http(200)}, 'ready', 'ready', 'GET /health 200'),
    ({'status': 'starting', 'stage': 'cuda_graph', 'http': _http(503)}, 'starting', 'cuda_graph', 'GET /health 503'),
    ({'status': 'starting', 'stage': 'load_weights', 'http': _http(None, 'Connection refused')},
     'starting', 'load_weights', 'GET /health Connection refused'),
    # 'systemctl stop sglang' (a newcomer's): one probe decides nothing, but a unit that runs nothing is not starting
    ({'status': 'starting', 'stage': 'start', 'http': _http(None, 'Connection refused'),
      'unit': {'ActiveState': 'failed', 'SubState': 'failed', 'Result': 'exit-code'}},
     'stopped', None, 'the unit is failed (exit-code); GET /health Connection refused'),
    ({'status': 'starting', 'stage': 'load_weights', 'http': _http(None, 'Connection refused'),
      'unit': {'ActiveState': 'activating', 'SubState': 'start'}}, 'starting', 'load_weights', 'GET /health Connection refused'),
    ({'status': 'error', 'stage': 'start', 'msg': 'SGLang on node1: cannot watch unit sglang.service: not loaded'},
     'error', None, 'cannot watch unit sglang.service: not loaded'),
])
def test_check_row_from_the_probe(check_ready, status, stage, reason):
    row = check_row(check_ready=check_ready)
    assert (row['status'], row['stage'], row['reason']) == (status, stage, reason)
    # one probe, no start: no time, nothing changed
    assert row['seconds'] is None and row['changed'] is False


def test_check_row_driver_drift_fails_a_serving_host():
    row = check_row(check_ready={'status': 'ready', 'stage': 'ready', 'http': _http(200)},
                    check_driver={'match': False, 'msg': 'kernel module 590.48.01, user space 580.95.05'})
    assert (row['status'], row['ok'], row['driver']) == ('failed', False, 'drift')
    assert row['reason'] == 'driver: kernel module 590.48.01, user space 580.95.05'


def test_check_row_failed_preflight_fails_a_serving_host():
    problem = ('GPU 0 is held by pid 13118 python3 (user alice): runs as alice, not as the service user. SGLang would run '
               'out of memory on it.')
    row = check_row(check_ready={'status': 'ready', 'stage': 'ready', 'http': _http(200)},
                    # the role's pre-flight step registers the role's result; the pre-flight is its "preflight"
                    check_preflight={'outcome': 'unchanged', 'preflight': {
                        'ok': False, 'failed_checks': ['gpus'], 'msg': 'pre-flight ... failed',
                        'checks': {'gpus': {'status': 'failed', 'problems': [problem]}}}})
    assert (row['status'], row['ok'], row['preflight']) == ('failed', False, 'failed: gpus')
    assert row['reason'] == 'gpus: GPU 0 is held by pid 13118 python3 (user alice): runs as alice, not as the service user'
    row = check_row(check_ready={'status': 'ready', 'stage': 'ready', 'http': _http(200)},
                    check_preflight={'preflight': {'ok': True, 'failed_checks': [], 'msg': 'pre-flight for sglang.service ok'}})
    assert (row['status'], row['preflight']) == ('ready', 'ok')


def test_check_row_counts_patch_sites():
    row = check_row(check_ready={'status': 'ready', 'stage': 'ready'},
                    check_patch={'sites': [{'name': 'a', 'status': 'patched'}, {'name': 'b', 'status': 'patched'},
                                           {'name': 'c', 'status': 'not_applicable'}]})
    assert row['sm120'] == '1 not_applicable, 2 patched'


def test_check_row_says_patch_drift_in_the_words_of_a_check():
    """The check asks in check mode: the module's "applied" is a site a deploy would apply (a newcomer read "3 applied"
    on hosts whose patches were not there); nothing when the inventory does not manage the patches."""
    sites = [{'name': n, 'status': s} for n, s in (('a', 'applied'), ('b', 'already_applied'), ('c', 'reverted'), ('d', 'not_present'))]
    assert check_row(check_ready={'status': 'ready'}, check_patch={'sites': sites})['sm120'] == (
        '1 applied, 1 not_present, 1 to apply, 1 to revert')
    assert check_row(check_ready={'status': 'ready'}, check_patch={'skipped': True, 'changed': False}).get('sm120', '') == ''


def test_the_check_reports_the_patches_only_where_the_inventory_manages_them_and_changes_nothing():
    task = next(t for t in DataLoader().load_from_file(str(PLAYBOOK))[0]['tasks'] if t['name'] == 'Report the SM120 patch state')
    assert task['llmops.sglang.sglang_patch_sm120']['state'] == '{{ sglang_service_sm120_patch }}'
    assert task['changed_when'] is False and task['check_mode'] is True
    assert task['when'] == "sglang_service_sm120_patch | default('') in ['present', 'absent']"


def test_check_playbook_ends_with_the_report_and_fails_from_its_rows():
    tasks = DataLoader().load_from_file(str(PLAYBOOK))[0]['tasks']
    report, end, fail = tasks[-3:]
    assert report['llmops.sglang.sglang_run_report']['kind'] == 'check' and report['run_once'] is True
    assert end['ansible.builtin.meta'] == 'end_host' and end['when'] == 'inventory_hostname not in sglang_run_report.failed_hosts'
    assert fail['when'] == 'inventory_hostname in sglang_run_report.failed_hosts'
    # nothing else prints per host: the table is the summary
    assert not any('ansible.builtin.debug' in t for t in tasks)


@pytest.mark.parametrize('name', ['check.yml', 'deploy.yml'])
def test_last_task_fails_the_hosts_without_repeating_their_reason(name):
    """What failed was printed where it happened and the table gives each host's reason: the last task only makes the
    recap and the exit code count the host, with words shared by every host (ansible-core prints them once)."""
    tasks = DataLoader().load_from_file(str(PLAYBOOK.parent / name))[0]['tasks']
    end, fail = tasks[-2:]
    # the hosts that pass end before it, decided on the controller: a skipped task would fork a worker per host
    assert end == {'name': 'End the play for the hosts that passed', 'ansible.builtin.meta': 'end_host',
                   'when': 'inventory_hostname not in sglang_run_report.failed_hosts'}
    assert fail['when'] == 'inventory_hostname in sglang_run_report.failed_hosts'
    msg = fail['ansible.builtin.fail']['msg']
    assert '{{' not in msg and 'vars' not in fail
    assert msg.endswith('; its row in the table above says why')
