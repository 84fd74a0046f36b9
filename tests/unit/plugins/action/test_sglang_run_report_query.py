# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The JMESPath selection under the end-of-run table: one line per selected row, not indented JSON (the selection itself
is jmespath's; tests/unit/plugins/plugin_utils/test_run_report.py runs the documented queries)."""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.action.sglang_run_report import query_lines


def test_a_list_is_one_line_per_element():
    selected = [{'host': 'node1', 'signature': 'cuda_oom'}, {'signature': 'nccl_error', 'host': 'node3'}]
    assert query_lines("[?status=='crashed'].{host:host,signature:signature}", selected) == [
        "query [?status=='crashed'].{host:host,signature:signature}: 2 selected",
        '{"host": "node1", "signature": "cuda_oom"}',
        '{"host": "node3", "signature": "nccl_error"}',
    ]
    assert query_lines('[?changed].host', []) == ['query [?changed].host: 0 selected']


def test_anything_else_is_one_line():
    assert query_lines('length(@)', 3) == ['query length(@): 3']
    assert query_lines('[0]', {'host': 'node1', 'ok': True}) == ['query [0]: {"host": "node1", "ok": true}']
    assert query_lines('[5]', None) == ['query [5]: null']
