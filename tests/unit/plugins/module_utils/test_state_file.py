# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""State files read as typed records (module_utils/host/_state_file.py) on real files: every kind of damage is named,
set aside (bounded) and never a Python exception; check mode moves nothing; an unreadable file is an error."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host import _state_file as sf


@dataclasses.dataclass
class Inner:
    name: str
    count: int = 0


@dataclasses.dataclass
class Outer:
    inner: Inner
    ratio: float
    flag: bool = False
    tags: List[str] = dataclasses.field(default_factory=list)
    table: Dict[str, float] = dataclasses.field(default_factory=dict)
    note: Optional[str] = None


GOOD = {'inner': {'name': 'a', 'count': 2}, 'ratio': 1, 'flag': True, 'tags': ['x'], 'table': {'k': 2.5}, 'note': None,
        'added_by_a_newer_writer': 1}


def test_a_good_record_is_typed_and_unknown_keys_are_ignored():
    record = sf.typed(Outer, GOOD)
    assert record == Outer(Inner('a', 2), 1.0, True, ['x'], {'k': 2.5}, None)
    assert isinstance(record.ratio, float)


@pytest.mark.parametrize('change, why', [
    ({'inner': None}, 'record.inner is null, not a mapping'),
    ({'inner': {'count': 1}}, 'record.inner.name is missing'),
    ({'inner': {'name': 'a', 'count': True}}, 'record.inner.count is a boolean, not an integer'),
    ({'inner': {'name': 'a', 'count': 1.5}}, 'record.inner.count is a number, not an integer'),
    ({'ratio': 'fast'}, 'record.ratio is a string, not a number'),
    ({'ratio': False}, 'record.ratio is a boolean, not a number'),
    ({'flag': 'yes'}, 'record.flag is a string, not a boolean'),
    ({'tags': 'x'}, 'record.tags is a string, not a list'),
    ({'tags': ['x', 2]}, 'record.tags[1] is an integer, not a string'),
    ({'table': {'k': '1'}}, "record.table['k'] is a string, not a number"),
    ({'note': 3}, 'record.note is an integer, not a string'),
])
def test_every_wrong_field_is_named(change, why):
    with pytest.raises(sf.StateFormatError) as err:
        sf.typed(Outer, dict(GOOD, **change))
    assert str(err.value) == why


def parse(data):
    return sf.typed(Outer, data)


@pytest.mark.parametrize('content, why', [
    (b'\x00\x01\xff', 'not UTF-8 text'),
    (b'{"inner": ', 'not JSON: Expecting value: line 1 column 11 (char 10)'),
    (b'[]', 'record is a list, not a mapping'),
    (b'"text"', 'record is a string, not a mapping'),
    (json.dumps({'ratio': 1}).encode(), 'record.inner is missing'),
    (b'{"inner": {"name": "a"}, "ratio": 1, "pad": "' + b'x' * 2048 + b'"}', 'larger than 1024 bytes'),
])
def test_each_kind_of_damage_is_set_aside_and_named(tmp_path, content, why):
    path = tmp_path / 'state.json'
    path.write_bytes(content)
    record, damage = sf.read_state(str(path), parse, max_bytes=1024)
    assert (record, damage.path, damage.why) == (None, str(path), why)
    assert open(damage.kept_as, 'rb').read() == content and not path.exists()
    assert damage.message('thing') == ('The thing %s was damaged (%s): it was kept as %s, and this run went on as if it '
                                       'were absent.' % (path, why, damage.kept_as))


def test_no_file_is_no_record_and_no_damage(tmp_path):
    assert sf.read_state(str(tmp_path / 'none.json'), parse) == (None, None)


def test_check_mode_moves_nothing(tmp_path):
    path = tmp_path / 'state.json'
    path.write_text('nope')
    record, damage = sf.read_state(str(path), parse, check_mode=True)
    assert (record, damage.kept_as) == (None, None) and os.listdir(str(tmp_path)) == ['state.json']


def test_at_most_three_damaged_copies_are_kept_the_newest(tmp_path):
    path = tmp_path / 'state.json'
    kept = []
    for n in range(5):
        path.write_text('damaged %d' % n)
        kept.append(sf.read_state(str(path), parse)[1].kept_as)
    left = sorted(str(p) for p in tmp_path.iterdir())
    assert left == sorted(kept[-3:])
    assert [open(p).read() for p in kept[-3:]] == ['damaged 2', 'damaged 3', 'damaged 4']


def test_an_unreadable_file_is_an_error_not_damage(tmp_path):
    path = tmp_path / 'state.json'
    path.mkdir()  # reading a directory fails with an OSError other than "no such file"
    with pytest.raises(sf.StateReadError) as err:
        sf.read_state(str(path), parse)
    assert err.value.msg.startswith('Cannot read %s: [Errno 21] Is a directory' % path)
