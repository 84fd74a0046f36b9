# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""SGLang server arguments as a command line and as a systemd ExecStart= line (controller side).

One rule for the ``sglang_cli_args`` / ``sglang_args_by_flag`` / ``systemd_exec_args`` filters and the deploy plan.
Errors are ValueError with a message that says what to write instead; the filters turn them into AnsibleFilterError.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

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


def flag(name: Any, what: str = 'sglang_cli_args') -> str:
    """'tp_size' -> '--tp-size'; ValueError for a name that is not a flag name."""
    if not isinstance(name, str):
        raise ValueError(f"{what}: argument name {name!r} is not a string; use SGLang's flag name, e.g. 'tp-size'")
    if not valid_key(name):
        raise ValueError(f"{what}: {name!r} is not a valid SGLang flag name; use names such as 'model-path' or 'tp_size' "
                         "(without spaces or '=')")
    return flag_for_key(name)


def check_duplicates(args: Dict[str, Any], what: str = 'sglang_cli_args') -> None:
    """Reject two keys that render to the same flag (SGLang's argparse would silently keep the last)."""
    for name in args:
        flag(name, what)  # a malformed name gets its own message first
    duplicates = duplicate_keys(args)
    if duplicates:
        raise ValueError(f'{what}: ' + '; '.join(duplicate_message(f, keys) for f, keys in duplicates))


def by_flag(args: Optional[Dict[str, Any]], what: str = 'sglang_args_by_flag') -> Dict[str, Any]:
    """The arguments keyed by the flag each key names, without the leading '--', in their order."""
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise ValueError(f'{what}: expected a dict of SGLang server arguments, got {type(args).__name__}')
    check_duplicates(args, what)
    return dict((flag(name, what)[2:], value) for name, value in args.items())


def _scalar(name: str, value: Any) -> str:
    if isinstance(value, bool):
        raise ValueError(f"sglang_cli_args: {name} has a boolean inside a list; lists take strings or numbers")
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(',', ':'), sort_keys=True)
    return str(value)


def check_known(args: Dict[str, Any], known: Optional[set], switches: Optional[set], values: Optional[dict]) -> None:
    """Reject what the release would reject: unknown flags, values for switches, values of the wrong type or choice."""
    unknown, problems = check_args(args, {'flags': known, 'boolean_flags': switches, 'values': values})
    if unknown:
        raise ValueError(f"sglang_cli_args: {unknown_message(unknown)}. Fix the name, or drop the flag for this release "
                         f"(known_flags lists {len(known or ())} flags)")
    if problems:
        raise ValueError('sglang_cli_args: ' + '; '.join(problems))


def cli_args(args: Optional[Dict[str, Any]]) -> List[str]:
    """The arguments as command-line words, in their order: true = the bare flag, false/null = left out, a list = the
    flag and each element, a dict = one compact JSON word, anything else its string form."""
    if args is None:
        return []
    if not isinstance(args, dict):
        raise ValueError(f"sglang_cli_args: expected a dict of SGLang server arguments, got {type(args).__name__}; "
                         "write them as a mapping, e.g. {'model-path': 'zai-org/GLM-5-FP8', 'tp-size': 8}")
    check_duplicates(args)
    argv: List[str] = []
    for name, value in args.items():
        word = flag(name)
        if value is None or value is False:
            continue
        if value is True:
            argv.append(word)
        elif isinstance(value, dict):
            argv.extend([word, json.dumps(value, separators=(',', ':'), sort_keys=True)])
        elif isinstance(value, (list, tuple)):
            if value:
                argv.append(word)
                argv.extend(_scalar(word, v) for v in value)
        else:
            argv.extend([word, _scalar(word, value)])
    return argv


def _systemd_word(word: Any) -> str:
    word = str(word)
    # systemd expands %-specifiers and $VARIABLES in ExecStart=; double them to pass them through.
    word = word.replace('%', '%%').replace('$', '$$')
    if word and _SYSTEMD_SAFE.match(word):
        return word
    escaped = word.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n').replace('\t', '\\t')
    return f'"{escaped}"'


def systemd_exec_args(argv: List[Any]) -> str:
    """One ExecStart= line that systemd splits back into exactly ``argv``."""
    return ' '.join(_systemd_word(w) for w in argv)
