# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters that turn SGLang server arguments into a command line and a systemd ExecStart=."""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

# Characters that systemd's ExecStart= word splitting leaves alone without quoting.
_SYSTEMD_SAFE = re.compile(r'^[A-Za-z0-9_@+=:,./-]+$')
_FLAG_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_-]*$')


def _flag(name):
    if not isinstance(name, str):
        raise AnsibleFilterError(f"sglang_cli_args: argument name {name!r} is not a string; use SGLang's flag name, e.g. 'tp-size'")
    bare = name[2:] if name.startswith('--') else name
    if not _FLAG_NAME.match(bare):
        raise AnsibleFilterError(
            f"sglang_cli_args: {name!r} is not a valid SGLang flag name; use names such as 'model-path' or 'tp_size' "
            "(without spaces or '=')"
        )
    return '--' + bare.replace('_', '-')


def _scalar(flag, value):
    if isinstance(value, bool):
        raise AnsibleFilterError(f"sglang_cli_args: {flag} has a boolean inside a list; lists take strings or numbers")
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(',', ':'), sort_keys=True)
    return str(value)


def sglang_cli_args(args):
    """Render a dict of SGLang server arguments as an argv list.

    Keys are flag names with or without the leading C(--); underscores become dashes, so
    C(tp_size) and C(tp-size) both give C(--tp-size). Values: V(true) gives the bare flag,
    V(false) and V(null) leave the flag out, a list gives the flag followed by each element
    (SGLang's nargs flags), a dict is passed as one JSON string (for example
    C(--json-model-override-args)), anything else is passed as its string form.
    Keys keep the order of the dict.

    Raises AnsibleFilterError for a non-dict input or a malformed flag name.
    """
    if args is None:
        return []
    if not isinstance(args, dict):
        raise AnsibleFilterError(
            f"sglang_cli_args: expected a dict of SGLang server arguments, got {type(args).__name__}; "
            "write them as a mapping, e.g. {'model-path': 'zai-org/GLM-5-FP8', 'tp-size': 8}"
        )
    argv = []
    for name, value in args.items():
        flag = _flag(name)
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, dict):
            argv.extend([flag, json.dumps(value, separators=(',', ':'), sort_keys=True)])
        elif is_sequence(value):
            if not value:
                continue
            argv.append(flag)
            argv.extend(_scalar(flag, v) for v in value)
        else:
            argv.extend([flag, _scalar(flag, value)])
    return argv


def _systemd_word(word):
    word = str(word)
    # systemd expands %-specifiers and $VARIABLES in ExecStart=; double them to pass them through.
    word = word.replace('%', '%%').replace('$', '$$')
    if word and _SYSTEMD_SAFE.match(word):
        return word
    escaped = word.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n').replace('\t', '\\t')
    return f'"{escaped}"'


def systemd_exec_args(argv):
    """Join an argv list into one string that systemd's ExecStart= splits back into the same argv.

    Each word is double-quoted when it contains anything but C([A-Za-z0-9_@+=:,./-]);
    C(%) and C($) are doubled so systemd does not expand specifiers or environment variables.

    Raises AnsibleFilterError for a non-list input.
    """
    if isinstance(argv, str) or not is_sequence(argv):
        raise AnsibleFilterError(f"systemd_exec_args: expected a list of arguments, got {type(argv).__name__}")
    return ' '.join(_systemd_word(w) for w in argv)


class FilterModule:
    """SGLang command-line filters."""

    def filters(self):
        return {
            'sglang_cli_args': sglang_cli_args,
            'systemd_exec_args': systemd_exec_args,
        }
