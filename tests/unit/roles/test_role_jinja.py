# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles wire modules together and carry no algorithm: at most tests/role_jinja.BUDGET Jinja expressions in all the
collection's roles together (conditions included), each one line of logic (counted by tests/role_jinja.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import role_jinja  # noqa: E402  pylint: disable=wrong-import-position


def test_the_roles_stay_within_the_jinja_budget():
    files = role_jinja.count()
    every = [e for _name, found in files for e in found]
    assert len(every) <= role_jinja.BUDGET, ['%d %s' % (len(found), name) for name, found in files]


def test_every_expression_is_one_line_of_logic():
    """None longer than one line, but for the ones role_jinja.KNOWN_LONG still counts (their number can only go down)."""
    per_file = {}
    for name, expression in role_jinja.too_long(role_jinja.count()):
        per_file.setdefault(name, []).append(expression)
    over = dict((name, found) for name, found in per_file.items() if len(found) > role_jinja.KNOWN_LONG.get(name, 0))
    assert over == {}
    assert all(len(per_file.get(name, ())) == count for name, count in role_jinja.KNOWN_LONG.items()), per_file.keys()


def test_the_counter_counts_braces_conditions_and_assertions(tmp_path):
    tasks = tmp_path / 'r' / 'tasks'
    tasks.mkdir(parents=True)
    (tasks / 'main.yml').write_text('- name: "{{ a }}"\n  x: {y: "{{ b | c }}"}\n  when: d\n'
                                    '- name: n\n  assert:\n    that: [e, f]\n  # {{ not counted }}\n')
    assert role_jinja.count(tmp_path) == [('r/tasks/main.yml', ['{{ a }}', '{{ b | c }}', 'd', 'e', 'f'])]
