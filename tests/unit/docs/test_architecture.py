# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/architecture.md is the map of the code: it names every module, action plugin, module_utils file and
plugin_utils file of the checkout, and every module_utils package says in its __init__.py what it owns (issue 21)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLUGINS = ROOT / 'plugins'
ARCHITECTURE = (ROOT / 'docs' / 'architecture.md').read_text(encoding='utf-8')
# the words the map writes in backquotes or table cells: `sglang/_smoke.py`, `wait_for_sglang`, `_deploy_plan.py`
NAMED = set(re.findall(r'[A-Za-z0-9_/.]+', ARCHITECTURE))


def sources(folder: str):
    return sorted(p for p in (PLUGINS / folder).rglob('*.py') if p.name != '__init__.py')


def named(*spellings: str) -> bool:
    return any(s in NAMED for s in spellings)


@pytest.mark.parametrize('path', sources('module_utils'), ids=lambda p: str(p.relative_to(PLUGINS)))
def test_every_module_utils_file_is_on_the_map(path):
    rel = path.relative_to(PLUGINS / 'module_utils').as_posix()
    assert named(rel, rel[:-3]), rel


@pytest.mark.parametrize('folder', ['modules', 'action', 'plugin_utils', 'lookup', 'callback'])
def test_every_module_and_controller_plugin_is_on_the_map(folder):
    missing = [p.name for p in sources(folder) if not named(p.stem, p.name)]
    assert missing == []


@pytest.mark.parametrize('package', sorted(p.parent for p in (PLUGINS / 'module_utils').glob('*/__init__.py')),
                         ids=lambda p: p.name)
def test_every_module_utils_package_says_what_it_owns(package):
    doc = ast.get_docstring(ast.parse((package / '__init__.py').read_text(encoding='utf-8')))
    assert doc and len(doc.split()) >= 5, package.name
    assert named(package.name + '/'), package.name
