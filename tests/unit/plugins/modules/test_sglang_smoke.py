# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_smoke module in-process: a hang fails the task with what was sent, bad input says what to do. The
request itself against the streaming stand-in is tested in tests/unit/plugins/module_utils/test_sglang_smoke.py."""

from __future__ import annotations

import json
import socket

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import sglang_smoke


def run_module(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as info:
            sglang_smoke.main()
    result = json.loads(capsys.readouterr().out)
    assert (info.value.code == 0) != bool(result.get('failed')), result
    return result


def test_a_server_that_accepts_and_never_answers_fails_the_task_naming_the_request(capsys):
    with socket.socket() as listener:  # the kernel completes the TCP handshake; nobody ever reads or answers
        listener.bind(('127.0.0.1', 0))
        listener.listen(8)
        url = 'http://127.0.0.1:%d' % listener.getsockname()[1]
        result = run_module(capsys, {'url': url, 'model': 'glm-5', 'endpoint': 'chat_completions', 'timeout': 0.5,
                                     'api_key': 'sk-secret-99', 'max_tokens': 2})
    assert result['failed'] is True
    assert result['changed'] is False
    assert result['ok'] is False
    assert result['status'] is None
    assert result['sent']['url'] == url + '/v1/chat/completions'
    assert result['sent']['body']['messages'] == [{'role': 'user', 'content': 'The capital of France is'}]
    assert result['msg'].startswith('smoke request failed: no complete answer within 0.5s, not even the HTTP status line')
    assert 'sk-secret-99' not in json.dumps(result)


@pytest.mark.parametrize('args, words', [
    ({'url': '127.0.0.1:30000'}, 'must start with http://'),
    ({'url': 'http://127.0.0.1:30000', 'max_tokens': 0}, 'max_tokens must be 1 or more'),
    ({'url': 'http://127.0.0.1:30000', 'timeout': 0}, 'timeout more than 0'),
])
def test_bad_input(capsys, args, words):
    result = run_module(capsys, args)
    assert result['failed'] and words in result['msg']
