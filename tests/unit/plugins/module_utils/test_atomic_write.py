# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Atomic writes on a real, really full file system (a 64 KiB tmpfs mounted for the test: conftest.tiny_fs)."""

from __future__ import annotations

import errno
import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import NoSpaceError, write_atomic


def test_full_file_system_names_path_and_free_space_and_keeps_the_old_file(tiny_fs):
    target = tiny_fs / 'sglang.service'
    target.write_bytes(b'[Service]\nExecStart=/old\n')
    filler = tiny_fs / 'filler'
    with open(filler, 'wb') as handle:
        try:
            handle.write(b'x' * (60 * 1024))
        except OSError:
            pass
    with pytest.raises(NoSpaceError) as info:
        write_atomic(str(target), b'y' * (32 * 1024), os.replace)
    err = info.value
    assert err.errno == errno.ENOSPC
    assert (err.path, err.needed) == (str(target), 32 * 1024)
    assert 0 <= err.free < 32 * 1024
    assert str(target) in str(err) and 'free' in str(err)
    assert target.read_bytes() == b'[Service]\nExecStart=/old\n'
    assert sorted(p.name for p in tiny_fs.iterdir()) == ['filler', 'sglang.service']   # no temporary file left


def test_write_that_fits_replaces_the_file(tiny_fs):
    target = tiny_fs / 'sglang.env'
    target.write_bytes(b'A=1\n')
    write_atomic(str(target), b'A=2\n', os.replace)
    assert target.read_bytes() == b'A=2\n'
    assert sorted(p.name for p in tiny_fs.iterdir()) == ['sglang.env']
