# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Count the Jinja in the collection's roles: the roles wire modules together, the decisions are Python.

    python3 tests/role_jinja.py          # one line per file with expressions, the total, the longest expression

An expression is a ``{{ ... }}`` or ``{% ... %}`` anywhere in a role's YAML or templates (comments left out), or the
condition of a ``when``, ``changed_when``, ``failed_when`` or ``until`` keyword and each item of an ``assert``'s
``that``: each of them is Jinja that ansible-core templates on every host. tests/unit/roles/test_role_jinja.py holds
the budget (``BUDGET`` in all roles together) and that every expression is one line of logic: no line break inside,
at most ``LONGEST`` characters.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

import yaml

ROLES = Path(__file__).resolve().parents[1] / 'roles'
BUDGET = 150
LONGEST = 110
# Expressions longer than one line of logic that a role still has (file -> how many), to be moved into Python by its
# owner; the count per file can only go down. The sglang_gateway role (issue 20) landed with five; its decisions moved
# into Python (llmops.sglang.sglang_gateway_deploy, issue 21), none is left.
KNOWN_LONG: dict = {}
CONDITIONS = ('when', 'changed_when', 'failed_when', 'until')
BRACES = re.compile(r'{{.*?}}|{%.*?%}', re.S)


def _strip_comments(text: str) -> str:
    return '\n'.join(line for line in text.splitlines() if not line.lstrip().startswith('#'))


def _conditions(node) -> Iterator[str]:
    """The conditions of a task file's keywords, as text (a list of conditions is one expression per item)."""
    if isinstance(node, list):
        for item in node:
            yield from _conditions(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITIONS or (key == 'that' and isinstance(node, dict)):
                for cond in value if isinstance(value, list) else [value]:
                    if isinstance(cond, str) and '{{' not in cond:
                        yield cond
            else:
                yield from _conditions(value)


def expressions(path: Path) -> List[str]:
    """Every Jinja expression in one role file."""
    text = _strip_comments(path.read_text(encoding='utf-8'))
    found = [m.group(0) for m in BRACES.finditer(text)]
    if path.suffix in ('.yml', '.yaml') and path.parent.name in ('tasks', 'handlers'):
        found += list(_conditions(yaml.safe_load(text)))
    return found


def count(roles: Path = ROLES) -> List[Tuple[str, List[str]]]:
    """(file relative to roles/, its expressions) for every role file that has any."""
    out = []
    for path in sorted(roles.rglob('*')):
        if path.is_file() and path.suffix in ('.yml', '.yaml', '.j2'):
            found = expressions(path)
            if found:
                out.append((str(path.relative_to(roles)), found))
    return out


def too_long(files: List[Tuple[str, List[str]]]) -> List[Tuple[str, str]]:
    """(file, expression) for every expression longer than one line of logic: a line break inside or more than
    ``LONGEST`` characters."""
    return [(name, e) for name, found in files for e in found if '\n' in e.strip() or len(e) > LONGEST]


def main() -> int:
    files = count()
    for name, found in files:
        print('%4d  %s' % (len(found), name))
    every = [e for _name, found in files for e in found]
    longest = max(every, key=len) if every else ''
    print('%4d  in all (budget %d); longest %d characters: %s' % (len(every), BUDGET, len(longest), longest))
    return 0 if len(every) <= BUDGET else 1


if __name__ == '__main__':
    sys.exit(main())
