# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""``dcgmi diag`` (NVIDIA DCGM's diagnostic) read from its table: every test, its result, the GPUs it failed on and
the error and warning text DCGM printed under it.

The table has two columns, the test and its result (``Pass``, ``Fail``, ``Warn``, ``Skip``, ``Pass - All``,
``Fail - GPU: 0``, ``Pass - GPUs: 1, 2``); a wide cell continues on the next rows with an empty first column; rows
named ``Error``, ``Warning`` and ``Info`` belong to the test above them; ``-----  Deployment  ---`` rows open a
category. Level 1 (``dcgmi diag -r 1``) runs the Deployment tests in seconds (the driver, the libraries, persistence
mode, pending page retirements and row remappings, the InfoROM).

Pure functions over text; standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import List, Optional

_CATEGORY_RE = re.compile(r'^[|+]-+\s+(?P<name>[A-Za-z][A-Za-z ]*?)\s+-+[+|]')
_GPUS_RE = re.compile(r'GPUs?:\s*(?P<ids>\d+(?:\s*,\s*\d+)*)')
_GPU_IN_TEXT_RE = re.compile(r'\bGPU (?P<id>\d+)\b')
_NOTES = ('error', 'warning', 'info')
_UNAVAILABLE_RE = re.compile(r'(unable to establish a connection|Unable to connect|host engine|nv-hostengine)', re.I)


@dataclass
class DiagTest:
    """One test of the diagnostic."""

    name: str
    category: str = ''
    result: str = ''
    errors: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    failed_gpus: List[int] = field(default_factory=list)

    @property
    def failed(self):
        return bool(self.errors) or any(part.strip().lower().startswith('fail') for part in self.result.split('|'))

    def to_json(self):
        data = asdict(self)
        data['failed'] = self.failed
        return data


@dataclass
class DiagReport:
    """The whole diagnostic: its tests, the metadata rows (DCGM and driver version), or why it did not run."""

    tests: List[DiagTest] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    unavailable: Optional[str] = None

    @property
    def failed(self):
        return [test for test in self.tests if test.failed]

    def to_json(self):
        return {'tests': [test.to_json() for test in self.tests], 'metadata': dict(self.metadata),
                'unavailable': self.unavailable, 'failed': [test.name for test in self.failed]}


def _cells(line):
    parts = line.split('|')
    if len(parts) < 3 or not line.startswith('|'):
        return None
    return parts[1], parts[2]


# DCGM wraps a cell's text hard at this many characters, also inside a word; a wrap at a word leaves the space.
_CELL_WIDTH = 45


def _piece(value):
    """The text of one cell row as DCGM printed it (its one space of padding dropped), for joining wrapped rows."""
    return value[1:1 + _CELL_WIDTH]


def _join(pieces):
    return ' '.join(''.join(pieces).split())


def _gpus(text):
    found = _GPUS_RE.search(text)
    if found:
        return [int(part) for part in found.group('ids').split(',')]
    return [int(m.group('id')) for m in _GPU_IN_TEXT_RE.finditer(text)]


class _Reader:
    """Feeds the table's rows into tests; a wrapped cell is collected until the next named row."""

    def __init__(self):
        self.report = DiagReport()
        self.category = ''
        self.test = None
        self.note = None  # (kind, [pieces]) being collected
        self.result = None  # [pieces] of the current test's result

    def close_note(self):
        if self.note and self.test is not None:
            kind, pieces = self.note
            text = _join(pieces)
            (self.test.errors if kind == 'error' else self.test.warnings if kind == 'warning' else []).append(text)
            if kind == 'error':
                self.test.failed_gpus = sorted(set(self.test.failed_gpus) | set(_gpus(text)))
        self.note = None

    def row(self, name, value):
        name, text = name.strip(), value.strip()
        if not name:
            if self.note:
                self.note[1].append(_piece(value))
            elif self.test is not None and text:
                self.test.result += ' | ' + text
                if text.lower().startswith('fail'):
                    self.test.failed_gpus = sorted(set(self.test.failed_gpus) | set(_gpus(text)))
            return
        self.close_note()
        if self.category.lower() == 'metadata':
            self.report.metadata[name] = text
        elif name.lower() in _NOTES:
            if self.test is None:  # a note right under a category (an excerpt): it speaks for the category
                self.test = DiagTest(name=self.category or 'Diagnostic', category=self.category)
                self.report.tests.append(self.test)
            self.note = (name.lower(), [_piece(value)])
        elif name != 'Diagnostic':
            self.test = DiagTest(name=name, category=self.category, result=text)
            if text.lower().startswith('fail'):
                self.test.failed_gpus = _gpus(text)
            self.report.tests.append(self.test)


def parse(text):
    """The tests of a ``dcgmi diag`` table; ``unavailable`` says why there is none (no host engine, no table)."""
    reader = _Reader()
    for line in (text or '').splitlines():
        line = line.rstrip()
        category = _CATEGORY_RE.match(line)
        if category:
            reader.close_note()
            reader.category, reader.test = category.group('name').strip(), None
            continue
        cells = _cells(line)
        if cells:
            reader.row(*cells)
    reader.close_note()
    report = reader.report
    if not report.tests:
        found = _UNAVAILABLE_RE.search(text or '')
        report.unavailable = (text or '').strip().splitlines()[0][:300] if found else 'no diagnostic table in its output'
    return report
