# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which step of llmops.sglang.sglang_deploy keeps the runtime guard current on the no-change path: the role ends a
single host's unchanged run after its plan step (meta end_role), so the plan step does it there; a multi-node
deployment decides in its ranks step, which does it there."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.llmops.sglang.plugins.action import sglang_deploy


@pytest.mark.parametrize('multinode, step, kept', [
    (False, 'plan', True), (False, 'ranks', False), (True, 'plan', False), (True, 'ranks', True)])
def test_the_step_that_decides_unchanged_keeps_the_guard(monkeypatch, multinode, step, kept):
    calls = []
    monkeypatch.setattr(sglang_deploy.guard, 'guard_unchanged', calls.append)
    monkeypatch.setattr(sglang_deploy.verify, 'run_gate', lambda ctx, changed: None)
    monkeypatch.setattr(sglang_deploy.steps, 'step_plan', lambda ctx: None)
    monkeypatch.setattr(sglang_deploy.steps, 'step_ranks', lambda ctx: None)
    ctx = SimpleNamespace(plan=SimpleNamespace(multinode=multinode), facts=SimpleNamespace(unchanged=True))
    for part in sglang_deploy.STEPS[step][1:]:  # the step's own function was bound before the patch: only the rest
        part(ctx)
    assert calls == ([ctx] if kept else [])
