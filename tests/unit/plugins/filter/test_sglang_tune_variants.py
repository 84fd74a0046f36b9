# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tune playbook's check of its variants' keys (plugins/filter/sglang_tune.py, sglang_tune_variant_problems)."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.filter.sglang_tune import FilterModule, sglang_tune_variant_problems


def test_documented_keys_pass():
    assert sglang_tune_variant_problems([
        {'name': 'fusion', 'sm120_patch': 'present', 'args': {'enable-flashinfer-allreduce-fusion': True}},
        {'name': 'nccl-tree', 'environment': {'NCCL_ALGO': 'Tree'}}, {'name': 'plain'}]) == []


def test_misspelled_keys_are_named_with_the_nearest_valid_one():
    assert sglang_tune_variant_problems([{'name': 'ok'}, {'name': 'typo-variant', 'arg': {}, 'enviroment': {}}]) == [
        "variant 'typo-variant' has the key 'arg', which the tune does not know: did you mean 'args'? "
        "(a variant takes name, args, environment, sm120_patch).",
        "variant 'typo-variant' has the key 'enviroment', which the tune does not know: did you mean 'environment'? "
        "(a variant takes name, args, environment, sm120_patch).",
    ]
    assert "did you mean 'sm120_patch'?" in sglang_tune_variant_problems([{'name': 'p', 'sm120-patch': 'present'}])[0]


def test_a_key_near_nothing_lists_the_valid_ones_and_a_nameless_variant_is_named_by_index():
    assert sglang_tune_variant_problems([{'args': {}, 'policy': 'fail'}]) == [
        "sglang_tune_variants[0] has the key 'policy', which the tune does not know "
        "(a variant takes name, args, environment, sm120_patch)."]


@pytest.mark.parametrize('variants, said', [('fusion', 'must be a list'), ([['fusion']], 'sglang_tune_variants[0] must be a mapping')])
def test_not_a_list_of_mappings(variants, said):
    assert said in sglang_tune_variant_problems(variants)[0]


def test_the_filter_is_registered():
    assert FilterModule().filters()['sglang_tune_variant_problems'] is sglang_tune_variant_problems
