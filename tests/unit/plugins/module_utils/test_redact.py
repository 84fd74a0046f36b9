# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Secrets kept out of returned data (module_utils/sglang/_redact.py): named values and SGLang's secret server
arguments in the shapes SGLang logs its configuration, and a real wait over a real log that holds the key."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.sglang._redact import MASK, redact, redact_text


@pytest.mark.parametrize('line, expected', [
    # 0.5.9 engine.py: logger.info(f"{server_args=}") -> the dataclass repr
    ("[2026-01-05 10:00:00] server_args=ServerArgs(model_path='zai-org/GLM-5', api_key='sk-live-1', admin_api_key=None, "
     "ssl_keyfile_password='pw 1', port=30000)",
     "[2026-01-05 10:00:00] server_args=ServerArgs(model_path='zai-org/GLM-5', api_key='%s', admin_api_key=None, "
     "ssl_keyfile_password='%s', port=30000)" % (MASK, MASK)),
    # 0.5.19+: server_args={...} with JSON quoting
    ('server_args={"api_key": "sk-2", "admin_api_key": null, "tokenizer_path": "t"}',
     'server_args={"api_key": "%s", "admin_api_key": null, "tokenizer_path": "t"}' % MASK),
    ("{'api_key': 'sk-3', 'host': '0.0.0.0'}", "{'api_key': '%s', 'host': '0.0.0.0'}" % MASK),
    ("api_key='it''s'", "api_key='%s''s'" % MASK),
    # names that only contain the word are left alone
    ('num_api_key_slots=4 tokenizer_api_key_hint', 'num_api_key_slots=4 tokenizer_api_key_hint'),
])
def test_secret_server_arguments_are_masked_in_every_shape_sglang_logs(line, expected):
    assert redact_text(line) == expected


def test_named_values_are_masked_longest_first_in_nested_results():
    result = {'msg': 'HF_TOKEN=hf_abcdef and hf_abc', 'log_tail': ['x hf_abcdef', ('hf_abc',)], 'n': 3, 'none': None}
    out = redact(result, ['hf_abc', 'hf_abcdef', ''])
    assert out == {'msg': 'HF_TOKEN=%s and %s' % (MASK, MASK), 'log_tail': ['x %s' % MASK, (MASK,)], 'n': 3, 'none': None}
    assert 'hf_abc' not in json.dumps(out)
