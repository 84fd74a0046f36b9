# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rank_differences filter (controller side, so not among the module_utils tests that ansible-test runs with the
target's restricted imports)."""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.filter.preflight import rank_differences

# a model revision as the hub cache names it (a commit id)
COMMIT = 'c1899de289a04d12100db370d81485cdf75e47ca'


def test_ranks_that_differ_are_named_with_their_values():
    base = {'sglang_version': '0.5.9', 'sm120_patch': 'a1', 'torch': '2.8.0', 'torch_cuda': '12.8', 'driver_branch': '570',
            'model_revision': COMMIT}
    assert rank_differences({'node1': base, 'node2': dict(base)}) == []
    assert rank_differences({'node1': base, 'node2': dict(base, sglang_version='0.5.10', driver_branch='580')}) == [
        'SGLang version differs: node1=0.5.9, node2=0.5.10', 'NVIDIA driver branch differs: node1=570, node2=580']
    assert rank_differences({'node1': base}) == []
