# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Compare the pre-flight facts of the ranks of one multi-node SGLang deployment (controller side)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils.deploy._rank_compare import describe, differences


def rank_differences(ranks):
    """{rank: sglang_preflight's rank facts} -> one sentence per fact on which the ranks disagree."""
    if not isinstance(ranks, dict):
        raise AnsibleFilterError('rank_differences: expected a dict of rank name to the rank facts of llmops.sglang.sglang_preflight '
                                 '(its "rank" result), got %s' % type(ranks).__name__)
    return describe(differences(ranks))


class FilterModule:
    """Pre-flight filters."""

    def filters(self):
        return {'rank_differences': rank_differences}
