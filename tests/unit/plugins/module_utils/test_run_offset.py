# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the current run starts in the log (_run_offset): the decision, and the record on a real file system."""

from __future__ import annotations

import os

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _run_offset as ro

RECORDED = ro.RunRecord(invocation='a' * 32, offset=4096)


def test_same_invocation_keeps_the_recorded_offset():
    assert ro.decide(RECORDED, 'a' * 32, 9000) is RECORDED


def test_a_new_invocation_starts_at_the_log_size_measured_before_the_start():
    assert ro.decide(RECORDED, 'b' * 32, 9000) == ro.RunRecord(invocation='b' * 32, offset=9000)
    assert ro.decide(None, 'b' * 32, 9000) == ro.RunRecord(invocation='b' * 32, offset=9000)


def test_a_unit_that_is_not_running_never_matches_a_record():
    stopped = ro.RunRecord(invocation='', offset=10)
    assert ro.decide(stopped, '', 0) == ro.RunRecord(invocation='', offset=0)


def test_record_round_trip_and_damaged_records(tmp_path):
    path = str(tmp_path / 'sglang.run.json')
    assert ro.read(path) == (None, None)
    ro.write(path, RECORDED)
    assert ro.read(path) == (RECORDED, None)
    assert oct(os.stat(path).st_mode & 0o777) == '0o644'
    # the format the role's earlier copy task wrote
    with open(path, 'w') as handle:
        handle.write('{"invocation": "x", "offset": 12}\n')
    assert ro.read(path) == (ro.RunRecord('x', 12), None)
    for text, why in (('', 'not JSON: Expecting value: line 1 column 1 (char 0)'), ('[]', 'run record is a list, not a mapping'),
                      ('{"invocation": "x"}', 'run record.offset is missing'),
                      ('{"invocation": "x", "offset": "twelve"}', 'run record.offset is a string, not an integer')):
        with open(path, 'w') as handle:
            handle.write(text)
        record, damage = ro.read(path)
        assert (record, damage.why) == (None, why), text
        assert open(damage.kept_as).read() == text and not os.path.exists(path)
