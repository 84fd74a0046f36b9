# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Compare what the ranks of one multi-node SGLang deployment run. Ranks that differ in SGLang version, SM120 patch
state, torch/CUDA build, driver branch or model revision hang at the first collective instead of failing, so the
pre-flight refuses them on every rank. Pure functions; used by the module and by the controller-side filter.
"""

from __future__ import annotations

# The facts each rank reports (sglang_preflight's RV(rank)) and how a difference is named.
RANK_FIELDS = (
    ('sglang_version', 'SGLang version'),
    ('sm120_patch', 'SM120 patch state (digest of the patched sources)'),
    ('torch', 'torch build'),
    ('torch_cuda', 'CUDA of the torch build'),
    ('driver_branch', 'NVIDIA driver branch'),
    ('model_revision', 'model revision'),
)


def differences(ranks):
    """[{'field', 'what', 'values': {rank: value}}] for every fact on which the ranks ({rank: facts}) disagree."""
    found = []
    if len(ranks) < 2:
        return found
    for key, what in RANK_FIELDS:
        values = dict((str(rank), (facts or {}).get(key)) for rank, facts in ranks.items())
        if len(set(values.values())) > 1:
            found.append({'field': key, 'what': what, 'values': values})
    return found


def describe(diffs):
    """One sentence per difference: 'SGLang version differs: rank0=0.5.9, rank1=0.5.10'."""
    return ['%s differs: %s' % (diff['what'], ', '.join('%s=%s' % (rank, diff['values'][rank]) for rank in sorted(diff['values'])))
            for diff in diffs]
