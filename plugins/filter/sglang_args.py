# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters that turn SGLang server arguments into a command line and a systemd ExecStart=."""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

# the key -> flag rules shared with llmops.sglang.sglang_server_flags
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._flags import (
    check_args,
    duplicate_keys,
    duplicate_message,
    flag_for_key,
    unknown_message,
    valid_key,
)

# Characters that systemd's ExecStart= word splitting leaves alone without quoting.
_SYSTEMD_SAFE = re.compile(r'^[A-Za-z0-9_@+=:,./-]+$')


def _flag(name):
    if not isinstance(name, str):
        raise AnsibleFilterError(f"sglang_cli_args: argument name {name!r} is not a string; use SGLang's flag name, e.g. 'tp-size'")
    if not valid_key(name):
        raise AnsibleFilterError(
            f"sglang_cli_args: {name!r} is not a valid SGLang flag name; use names such as 'model-path' or 'tp_size' "
            "(without spaces or '=')"
        )
    return flag_for_key(name)


def _check_duplicates(args):
    """Reject two keys that render to the same flag (SGLang's argparse would silently keep the last)."""
    for name in args:
        _flag(name)  # a malformed name gets its own message first
    duplicates = duplicate_keys(args)
    if duplicates:
        raise AnsibleFilterError('sglang_cli_args: ' + '; '.join(duplicate_message(flag, keys) for flag, keys in duplicates))


def _scalar(flag, value):
    if isinstance(value, bool):
        raise AnsibleFilterError(f"sglang_cli_args: {flag} has a boolean inside a list; lists take strings or numbers")
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(',', ':'), sort_keys=True)
    return str(value)


def _flag_list(value, option):
    if value is None:
        return None
    if isinstance(value, str) or not is_sequence(value):
        raise AnsibleFilterError(f"sglang_cli_args: {option} must be a list of flags such as ['--tp-size'], got {type(value).__name__}; "
                                 "pass the flags or boolean_flags result of llmops.sglang.sglang_server_flags")
    return set('--' + str(f).lstrip('-') for f in value)


def _check_known(args, known_flags, boolean_flags, flag_values):
    """Reject what the installed SGLang would reject: unknown flags, values for switches, values of the wrong type or
    outside the choices (the rule of llmops.sglang.sglang_server_flags, sglang._flags.check_args)."""
    known = _flag_list(known_flags, 'known_flags')
    switches = _flag_list(boolean_flags, 'boolean_flags')
    if flag_values is not None and not isinstance(flag_values, dict):
        raise AnsibleFilterError(f"sglang_cli_args: flag_values must be a dict, got {type(flag_values).__name__}; "
                                 "pass the flag_values result of llmops.sglang.sglang_server_flags")
    unknown, problems = check_args(args, {'flags': known, 'boolean_flags': switches, 'values': flag_values})
    if unknown:
        raise AnsibleFilterError(f"sglang_cli_args: {unknown_message(unknown)}. Fix the name, or drop the flag for this release "
                                 f"(known_flags lists {len(known)} flags)")
    if problems:
        raise AnsibleFilterError('sglang_cli_args: ' + '; '.join(problems))


def sglang_cli_args(args, known_flags=None, boolean_flags=None, flag_values=None):
    """Render a dict of SGLang server arguments as an argv list.

    Keys are flag names with or without the leading C(--); underscores become dashes, so
    C(tp_size) and C(tp-size) both give C(--tp-size). Values: V(true) gives the bare flag,
    V(false) and V(null) leave the flag out, a list gives the flag followed by each element
    (SGLang's nargs flags), a dict is passed as one JSON string (for example
    C(--json-model-override-args)), anything else is passed as its string form.
    Keys keep the order of the dict.

    Raises AnsibleFilterError for a non-dict input, a malformed flag name, or two keys that name the same flag
    (C(tp_size) and C(tp-size), C(--tp-size) and C(tp-size)), whatever their values.

    With C(known_flags) (the RV(flags) of llmops.sglang.sglang_server_flags), a flag the installed release does not
    define raises AnsibleFilterError naming it and its close matches. With C(boolean_flags), a switch given a value
    that is not a boolean (or null) raises too. With C(flag_values) (the RV(flag_values) of the module), a value of the
    wrong type or outside the flag's choices raises, naming the flag, the value and what the flag expects.
    """
    if args is None:
        return []
    if not isinstance(args, dict):
        raise AnsibleFilterError(
            f"sglang_cli_args: expected a dict of SGLang server arguments, got {type(args).__name__}; "
            "write them as a mapping, e.g. {'model-path': 'zai-org/GLM-5-FP8', 'tp-size': 8}"
        )
    _check_duplicates(args)
    _check_known(args, known_flags, boolean_flags, flag_values)
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


def sglang_args_by_flag(args):
    """The arguments keyed by the flag each key names, without the leading C(--): C(tp_size) -> C(tp-size)."""
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise AnsibleFilterError(f"sglang_args_by_flag: expected a dict of SGLang server arguments, got {type(args).__name__}")
    _check_duplicates(args)
    return dict((_flag(name)[2:], value) for name, value in args.items())


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
            'sglang_args_by_flag': sglang_args_by_flag,
            'sglang_cli_args': sglang_cli_args,
            'systemd_exec_args': systemd_exec_args,
        }
