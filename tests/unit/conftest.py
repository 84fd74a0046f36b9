# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures shared by the unit tests."""

from __future__ import annotations

import os
import subprocess

import pytest


@pytest.fixture
def tiny_fs(tmp_path):
    """A real 64 KiB tmpfs, for writes that must meet a really full file system (root only: CI runs as root)."""
    mnt = tmp_path / 'tiny'
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip('mounting a tmpfs needs root (CI runs as root)')
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(['umount', '-l', str(mnt)], check=False)
