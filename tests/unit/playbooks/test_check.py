# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The per-host summary line of playbooks/check.yml, rendered by ansible-core's Templar from the playbook itself
for results of llmops.sglang.wait_for_sglang in check mode (the task vars are templated lazily, as in a play)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

PLAYBOOK = Path(__file__).resolve().parents[3] / 'playbooks' / 'check.yml'


def _summary_task():
    play = DataLoader().load_from_file(str(PLAYBOOK))
    return next(t for t in play[0]['tasks'] if t['name'] == 'Summarise')


def sglang_line(check_ready):
    task = _summary_task()
    line = next(m for m in task['ansible.builtin.debug']['msg'] if m.startswith('sglang:'))
    variables = {k: trust_as_template(v) for k, v in task.get('vars', {}).items()}
    variables['check_ready'] = check_ready
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(line))


def _http(status, error=None):
    return {'url': 'http://127.0.0.1:30000',
            'health': {'url': 'http://127.0.0.1:30000/health', 'status': status, 'error': error,
                       'refused': error == 'Connection refused', 'elapsed_ms': 2.0}}


@pytest.mark.parametrize('check_ready, line', [
    # serving before any startup line was read: the stage is still the initial one, the /health answer is what is known
    ({'status': 'ready', 'stage': 'start', 'http': _http(200)}, 'sglang: ready (GET /health 200)'),
    ({'status': 'ready', 'stage': None, 'http': _http(200)}, 'sglang: ready (GET /health 200)'),
    # a stage the log showed is kept
    ({'status': 'ready', 'stage': 'ready', 'http': _http(200)}, 'sglang: ready at stage ready (GET /health 200)'),
    ({'status': 'starting', 'stage': 'cuda_graph', 'http': _http(503)}, 'sglang: starting at stage cuda_graph (GET /health 503)'),
    ({'status': 'starting', 'stage': 'load_weights', 'http': _http(None, 'Connection refused')},
     'sglang: starting at stage load_weights (GET /health Connection refused)'),
    # nothing probed over HTTP (unit not there): only the status
    ({'status': 'error', 'stage': 'start'}, 'sglang: error'),
    ({'status': 'error', 'stage': 'start', 'http': {'url': 'http://127.0.0.1:30000'}}, 'sglang: error'),
    ({}, 'sglang: unknown'),
])
def test_sglang_summary_line(check_ready, line):
    assert sglang_line(check_ready) == line
