# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""deploy/_live: what a running server runs, read from a real process's /proc, against what a deployment wants
(issue 25: a deployment recorded that is not running)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _live

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
from procs import spawn  # noqa: E402  pylint: disable=wrong-import-position

SLEEPER = ('-c', 'import time; time.sleep(60)')
ARGV = (sys.executable,) + SLEEPER + ('--model-path', '/models/glm', '--tp-size', '4', '--port', '30000')


def wanted(argv=ARGV, **env):
    return _live.Wanted(argv=tuple(argv), environment=dict((k, _live.value_digest(v)) for k, v in env.items()))


def live(argv=ARGV, started_at=1000.0, credentials='', **env):
    return _live.Live(pid=42, argv=tuple(argv), environment=dict((k, _live.value_digest(v)) for k, v in env.items()),
                      started_at=started_at, credentials=credentials)


# ------------------------------------------------------------------------------------------------ decide (pure)

def test_the_same_configuration_differs_in_nothing():
    assert _live.differences(wanted(NCCL_P2P_DISABLE='1'), live(NCCL_P2P_DISABLE='1', PATH='/usr/bin'), {}) == []


def test_each_kind_of_difference_is_named_never_its_value():
    old = ARGV[:-2] + ('--port', '30001', '--enable-metrics')
    found = _live.differences(wanted(NCCL_P2P_DISABLE='1', HF_TOKEN='hf_new'), live(old, NCCL_P2P_DISABLE='0', HF_TOKEN='hf_old'),
                              {'/etc/sglang/sglang.env': 1001.0, '/etc/systemd/system/sglang.service': 999.0})
    assert found == ['arguments: --enable-metrics, --port', 'environment: HF_TOKEN, NCCL_P2P_DISABLE',
                     'changed after its start: /etc/sglang/sglang.env']
    assert not any('hf_' in line or '30001' in line for line in found)


def test_a_missing_variable_and_another_program():
    found = _live.differences(wanted(NCCL_DEBUG='INFO'), live(('/usr/bin/other',) + ARGV[1:]), {})
    assert found == ['arguments: the command', 'environment: NCCL_DEBUG']


def test_a_script_run_through_its_interpreter_is_the_same_command():
    """ExecStart=/usr/local/bin/standin shows in /proc as 'python3 /usr/local/bin/standin' (the #! line)."""
    argv = ('/usr/local/bin/standin', '--port', '30000')
    assert _live.differences(wanted(argv), live(('/usr/bin/python3',) + argv), {}) == []
    assert _live.differences(wanted(argv), live(('/usr/bin/python3', '/usr/local/bin/other', '--port', '30000')), {}) \
        == ['arguments: the command']


def test_the_api_key_file_is_found_in_the_units_credential_directory():
    argv = ARGV + ('--config', '%d/secret-args.yaml')
    running = ARGV + ('--config', '/run/credentials/sglang.service/secret-args.yaml')
    assert _live.differences(wanted(argv), live(running, credentials='/run/credentials/sglang.service'), {}) == []
    assert _live.differences(wanted(argv), live(ARGV), {}) == ['arguments: --config']


def test_flag_equals_value_is_the_same_flag():
    assert _live.argv_differences(('x', '--tp-size=4'), ('x', '--tp-size', '4')) == []


# ------------------------------------------------------------------------------------------------ observe (a real process)

def test_a_real_process_read_from_proc(tmp_path):
    before = tmp_path / 'sglang.env'
    before.write_text('NCCL_P2P_DISABLE="1"\n')
    time.sleep(0.05)
    t0 = time.time()
    env = {'PATH': os.environ.get('PATH', '/usr/bin'), 'NCCL_P2P_DISABLE': '1', 'HF_TOKEN': 'hf_secret_value'}
    with spawn(list(ARGV), env=env) as proc:
        deadline = time.time() + 10
        seen = _live.read_process(proc.pid)
        while seen is not None and seen.argv != ARGV and time.time() < deadline:  # between fork and exec
            time.sleep(0.02)
            seen = _live.read_process(proc.pid)
        assert seen is not None and seen.argv == ARGV
        assert abs(seen.started_at - t0) < 2.0
        assert _live.differences(wanted(NCCL_P2P_DISABLE='1', HF_TOKEN='hf_secret_value'), seen,
                                 _live.newest_change([str(before), str(tmp_path)])) == []
        after = tmp_path / 'sglang.secret.env'
        time.sleep(0.05)
        after.write_text('HF_TOKEN="hf_rotated"\n')
        found = _live.differences(wanted(NCCL_P2P_DISABLE='0', HF_TOKEN='hf_secret_value'), seen,
                                  _live.newest_change([str(before), str(after), str(tmp_path / 'absent')]))
        assert found == ['environment: NCCL_P2P_DISABLE', 'changed after its start: %s' % after]
        assert 'hf_secret_value' not in repr(seen.to_json()) and 'hf_secret_value' not in repr(seen)


def test_a_process_that_is_gone_reads_as_none():
    with spawn([sys.executable, '-c', 'pass']) as proc:
        proc.wait(10)
    assert _live.read_process(proc.pid) is None
    assert _live.read_process(0) is None
