# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Module tests run modules in-process: give each test what a real module process has."""

from __future__ import annotations

import pytest

from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.common import warnings as warnings_mod


@pytest.fixture(autouse=True)
def module_process_globals(monkeypatch):
    # A real module process is not the controller and starts with no warnings. In one pytest worker, tests that
    # imported controller code (action and filter plugins) flip is_controller, and module warnings would then go to
    # Display instead of the result.
    monkeypatch.setattr(module_utils_internal, 'is_controller', False)
    getattr(warnings_mod, '_global_warnings', {}).clear()
