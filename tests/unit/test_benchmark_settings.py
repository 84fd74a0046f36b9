# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/no_change_deploy.py hands its settings to fleet_deploy.prepare(): every setting prepare() reads is there.

The bug this holds: prepare() learnt to read ``internal_poll_interval`` (the README's ansible.cfg) and no_change_deploy
did not set it, so the benchmark failed with an AttributeError before its first host booted."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / 'benchmarks'
sys.path.insert(0, str(BENCHMARKS))
import fleet_deploy  # noqa: E402  pylint: disable=wrong-import-position,import-error
import no_change_deploy  # noqa: E402  pylint: disable=wrong-import-position,import-error


def settings_read_by(func, name: str = 'args') -> set:
    """The attributes FUNC reads from its parameter NAME."""
    tree = ast.parse(inspect.getsource(func))
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name}


def test_every_setting_prepare_reads_is_set():
    wanted = settings_read_by(fleet_deploy.prepare)
    assert 'internal_poll_interval' in wanted
    args = no_change_deploy.parse_args([])
    assert sorted(n for n in wanted if not hasattr(args, n)) == []


def test_the_command_line_sets_polling_and_forks():
    """The default polling is README's (tests/unit/docs/test_readme.py holds it); 'core' is ansible-core's."""
    assert no_change_deploy.parse_args(['--internal-poll-interval', 'core']).internal_poll_interval is None
    assert no_change_deploy.parse_args(['--hosts', '12']).forks == 12
