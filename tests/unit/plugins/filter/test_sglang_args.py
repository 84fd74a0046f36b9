# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import shlex

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.sglang_args import sglang_cli_args, systemd_exec_args


@pytest.mark.parametrize('args, argv', [
    ({'model-path': 'zai-org/GLM-5-FP8', 'tp_size': 8}, ['--model-path', 'zai-org/GLM-5-FP8', '--tp-size', '8']),
    ({'--trust-remote-code': True, 'enable-dp-attention': False, 'api-key': None}, ['--trust-remote-code']),
    ({'cuda-graph-bs': [1, 2, 4]}, ['--cuda-graph-bs', '1', '2', '4']),
    ({'cuda-graph-bs': []}, []),
    ({'mem-fraction-static': 0.85}, ['--mem-fraction-static', '0.85']),
    ({'json-model-override-args': {'rope_scaling': {'type': 'yarn', 'factor': 4}}},
     ['--json-model-override-args', '{"rope_scaling":{"factor":4,"type":"yarn"}}']),
    (None, []),
])
def test_cli_args(args, argv):
    assert sglang_cli_args(args) == argv


def test_cli_args_keeps_order():
    assert sglang_cli_args({'port': 1, 'host': 'h'}) == ['--port', '1', '--host', 'h']


@pytest.mark.parametrize('bad', [['--tp-size', '8'], 'tp-size=8'])
def test_cli_args_rejects_non_dict(bad):
    with pytest.raises(AnsibleFilterError, match='expected a dict'):
        sglang_cli_args(bad)


@pytest.mark.parametrize('name', ['tp size', 'tp-size=8', '', 3])
def test_cli_args_rejects_bad_flag(name):
    with pytest.raises(AnsibleFilterError):
        sglang_cli_args({name: 1})


def _systemd_split(line):
    # systemd's ExecStart= splitting of our output: POSIX double quotes with backslash escapes,
    # then %% and $$ collapse to single characters.
    return [w.replace('%%', '%').replace('$$', '$') for w in shlex.split(line)]


@pytest.mark.parametrize('argv', [
    ['/opt/sglang/venv/bin/python', '-m', 'sglang.launch_server', '--port', '30000'],
    ['--served-model-name', 'GLM 5 "fp8"'],
    ['--json-model-override-args', '{"a": "b c"}'],
    ['--chat-template', 'C:\\templates\\x.jinja'],
    ['--tool-call-parser', '100%', '--x', '$HOME'],
])
def test_systemd_exec_args_round_trip(argv):
    assert _systemd_split(systemd_exec_args(argv)) == argv


def test_systemd_exec_args_leaves_plain_words_unquoted():
    assert systemd_exec_args(['/usr/bin/python3', '-m', 'sglang.launch_server']) == '/usr/bin/python3 -m sglang.launch_server'


def test_systemd_exec_args_rejects_string():
    with pytest.raises(AnsibleFilterError, match='expected a list'):
        systemd_exec_args('--port 1')
