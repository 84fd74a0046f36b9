# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the llmops.sglang.brief stdout callback puts on the screen at verbosity 0: pure functions of task results.

Controller side only. The callback decides when; these functions decide what: the lines of a debug message, one line
for the hosts that failed a task with the same message, and whether a rescue section handles a failed task.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List

# A failure line is bounded: the whole message stays in the task's result (-v, the log, registered variables).
MESSAGE_CHARS = 240


def first_line(text: Any, limit: int = MESSAGE_CHARS) -> str:
    """The first non-empty line of a message, bounded.

    A first line that ends with a colon only announces what follows (ansible-core's ``Validation of arguments failed:``
    with one error per line after it): the lines after it are joined to it with '; ', so the line says what failed."""
    lines = [line.strip() for line in ('%s' % ('' if text is None else text)).splitlines() if line.strip()]
    line = lines[0] if lines else ''
    if line.endswith(':') and len(lines) > 1:
        line = '%s %s' % (line, '; '.join(lines[1:]))
    return line if len(line) <= limit else line[:limit - 3].rstrip() + '...'


def debug_lines(host: str, result: Dict[str, Any]) -> List[str]:
    """The screen lines of a debug task's result: its message as written (a list: one line per element; a one-line
    message prefixed with the host unless it names the host first), or the variable it shows, compactly."""
    if 'msg' in result:
        msg = result['msg']
        if isinstance(msg, list):
            return ['%s' % item for item in msg]
        if isinstance(msg, str):
            text = msg.rstrip('\n')
            if '\n' in text or text.startswith(host + ':') or text.startswith(host + ' '):
                return text.split('\n')
            return ['%s: %s' % (host, text)]
        return ['%s: %s' % (host, _compact(msg))]
    shown = [k for k in result if not k.startswith('_') and k not in ('changed', 'failed', 'skipped', 'msg')]
    return ['%s: %s = %s' % (host, key, _compact(result[key])) for key in shown]


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return '%s' % (value,)


def handled_by_rescue(task: Any) -> bool:
    """Whether a failure of `task` is handled by a rescue section: some enclosing block has one, and the task sits in
    that block's tasks (not in its rescue or always). Walks the parents ansible-core links (blocks, and the
    include_tasks / include_role task that brought an included file in); ids are kept by ansible-core's copies."""
    child, parent = task, getattr(task, '_parent', None)
    while parent is not None:
        rescue = getattr(parent, 'rescue', None)
        if rescue and any(getattr(item, '_uuid', None) == getattr(child, '_uuid', object()) for item in parent.block or ()):
            return True
        child, parent = parent, getattr(parent, '_parent', None)
    return False


@dataclass
class Failures:
    """Failures of the current task, kept until the task is over so that the hosts with the same message share one
    line (the deploy and check playbooks fail every host that is not serving with one message)."""

    task: str = ''
    by_message: Dict[str, List[str]] = field(default_factory=dict)

    def add(self, task: str, host: str, msg: Any) -> None:
        if task != self.task:
            self.by_message = {}
            self.task = task
        self.by_message.setdefault(first_line(msg) or 'failed', []).append(host)

    def lines(self) -> List[str]:
        """The kept failures as lines (hosts in natural order: node2 before node10), then forgotten."""
        out = ['failed: [%s] %s: %s' % (', '.join(sorted(hosts, key=natural)), self.task, msg)
               for msg, hosts in self.by_message.items()]
        self.by_message = {}
        return out


def natural(name: str) -> List[Any]:
    """A sort key that orders the numbers in names by value."""
    return [int(part) if part.isdigit() else part for part in re.split(r'(\d+)', name)]


def failure_message(result: Dict[str, Any]) -> str:
    """What a failed result says: its msg, else the first line of stderr, else the return code."""
    for key in ('msg', 'stderr', 'module_stderr'):
        line = first_line(result.get(key))
        if line:
            return line
    return 'failed (rc=%s)' % result['rc'] if result.get('rc') is not None else 'failed'
