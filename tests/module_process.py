# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run a module's main() in-process, as a module process would (module args in, JSON result out)."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils.testing import patch_module_args


def run_in_process(main, capsys, args, check_mode=False, diff=False):
    """The result of MAIN with ARGS; asserts that the exit code agrees with ``failed``."""
    args = dict(args)
    if check_mode:
        args['_ansible_check_mode'] = True
    if diff:
        args['_ansible_diff'] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit) as info:
            main()
    result = json.loads(capsys.readouterr().out)
    assert (info.value.code == 0) != bool(result.get('failed')), result
    return result
