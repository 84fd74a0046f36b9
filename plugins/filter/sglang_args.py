# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters that turn SGLang server arguments into a command line and a systemd ExecStart=."""

from __future__ import annotations


from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

# one rule for the filters and the sglang_service role's deploy plan
from ansible_collections.llmops.sglang.plugins.plugin_utils import _sglang_argv as argv_rules


def _flag_list(value, option):
    if value is None:
        return None
    if isinstance(value, str) or not is_sequence(value):
        raise AnsibleFilterError(f"sglang_cli_args: {option} must be a list of flags such as ['--tp-size'], got {type(value).__name__}; "
                                 "pass the flags or boolean_flags result of llmops.sglang.sglang_server_flags")
    return set('--' + str(f).lstrip('-') for f in value)


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
    try:
        if isinstance(args, dict):
            argv_rules.check_duplicates(args)
            known, switches = _flag_list(known_flags, 'known_flags'), _flag_list(boolean_flags, 'boolean_flags')
            if flag_values is not None and not isinstance(flag_values, dict):
                raise AnsibleFilterError(f"sglang_cli_args: flag_values must be a dict, got {type(flag_values).__name__}; "
                                         "pass the flag_values result of llmops.sglang.sglang_server_flags")
            argv_rules.check_known(args, known, switches, flag_values)
        return argv_rules.cli_args(args)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def sglang_args_by_flag(args):
    """The arguments keyed by the flag each key names, without the leading C(--): C(tp_size) -> C(tp-size)."""
    try:
        return argv_rules.by_flag(args)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def systemd_exec_args(argv):
    """Join an argv list into one string that systemd's ExecStart= splits back into the same argv.

    Each word is double-quoted when it contains anything but C([A-Za-z0-9_@+=:,./-]);
    C(%) and C($) are doubled so systemd does not expand specifiers or environment variables.

    Raises AnsibleFilterError for a non-list input.
    """
    if isinstance(argv, str) or not is_sequence(argv):
        raise AnsibleFilterError(f"systemd_exec_args: expected a list of arguments, got {type(argv).__name__}")
    return argv_rules.systemd_exec_args(argv)


class FilterModule:
    """SGLang command-line filters."""

    def filters(self):
        return {
            'sglang_args_by_flag': sglang_args_by_flag,
            'sglang_cli_args': sglang_cli_args,
            'systemd_exec_args': systemd_exec_args,
        }
