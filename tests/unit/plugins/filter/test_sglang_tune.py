# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tune playbook's report filter (plugins/filter/sglang_tune.py): the best variant and the table."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.sglang_tune import sglang_tune_report

BASELINE = {'name': 'baseline', 'status': 'first', 'output_tps': 1820.4, 'ttft_p50_ms': 57.2, 'power_w': 250.0}
FUSION = {'name': 'sm120-fusion', 'status': 'regressed', 'output_tps': 234.1, 'change_pct': -87.14, 'ttft_p50_ms': 206.0,
          'power_w': 125.0, 'after_rollback': '1811 tok/s against 1820 (-1 %)'}
NCCL = {'name': 'nccl-tree', 'status': 'crashed', 'signature': 'nccl_error', 'after_rollback': '1829 tok/s against 1820 (+0 %)'}
BETTER = {'name': 'bigger-graphs', 'status': 'accepted', 'output_tps': 2700.0, 'change_pct': 48.3, 'ttft_p50_ms': 55.0,
          'power_w': 330.0}


def test_the_baseline_stays_best_when_nothing_beats_it():
    report = sglang_tune_report([BASELINE, FUSION, NCCL])
    assert report['best'] is BASELINE
    assert report['table'] == [
        'variant       status     tok/s  change  TTFT p50 ms  power W  signature   after rollback',
        'baseline*     first      1820   -       57           250      -           -',
        'sm120-fusion  regressed  234    -87 %   206          125      -           1811 tok/s against 1820 (-1 %)',
        'nccl-tree     crashed    -      -       -            -        nccl_error  1829 tok/s against 1820 (+0 %)',
    ]


def test_a_kept_better_variant_is_best_and_a_faster_regressed_one_never_is():
    fast_but_rejected = dict(FUSION, output_tps=9999.0)
    assert sglang_tune_report([BASELINE, fast_but_rejected, NCCL, BETTER])['best'] is BETTER


def test_nothing_measured_leaves_the_first_row():
    rows = [dict(NCCL, name='baseline', status='crashed'), NCCL]
    assert sglang_tune_report(rows)['best'] is rows[0]


@pytest.mark.parametrize('bad', [None, [{'status': 'first'}], 'rows'])
def test_rows_without_names_are_refused(bad):
    with pytest.raises(AnsibleFilterError, match='expected a list of variant rows'):
        sglang_tune_report(bad)


def test_rows_of_several_servers_give_one_table_with_each_servers_best():
    rows = [dict(BASELINE, server='gpu-a'), dict(BETTER, server='gpu-a'),
            dict(BASELINE, server='mn-deploy'), dict(FUSION, server='mn-deploy')]
    report = sglang_tune_report(rows)
    assert report['best'] is None
    assert report['best_by_server'] == {'gpu-a': rows[1], 'mn-deploy': rows[2]}
    assert [line.split()[:2] for line in report['table']] == [
        ['server', 'variant'], ['gpu-a', 'baseline'], ['gpu-a', 'bigger-graphs*'], ['mn-deploy', 'baseline*'],
        ['mn-deploy', 'sm120-fusion']]
    assert sglang_tune_report([dict(BASELINE, server='gpu-a')])['table'][0].startswith('variant ')
