# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's own messages of a failed start, mined from the source of a released wheel (test side only).

Two kinds, read with ``ast`` from ``sglang/srt/**.py`` of the wheel that tests/sglang_wheels.py caches:

* ``exit_messages``: a message SGLang logs (``logger.error/critical/exception/warning``) right before it ends its
  process or process tree (within the next three statements: ``kill_process_tree``, ``sys.exit``, ``os._exit``,
  ``os.kill``/``send_signal`` - the SIGQUIT to its parent), not right before a ``raise`` (a raised exception prints a
  traceback, which the classifier reads by its structure). Only such a line tells the log's reader that SGLang gave up.
* ``argument_raises``: the exceptions ``server_args.py`` and ``arg_groups/`` raise to reject the arguments (class and
  message; an ``assert`` with a message is an AssertionError), each a failed start before any stage.

A message is its template: literal text with ``{}`` where an f-string, ``%`` or ``.format`` placeholder stood.
"""

from __future__ import annotations

import ast
import re
import zipfile
from collections import namedtuple

Message = namedtuple("Message", "path template")
Raise = namedtuple("Raise", "path exc template")

_ENDS_PROCESS = frozenset(("kill_process_tree", "exit", "_exit", "kill", "send_signal"))
_LOG_LEVELS = frozenset(("error", "critical", "exception", "fatal", "warning"))
# Only files that can end a process are parsed (one substring test per file instead of a parse).
_ENDS_PROCESS_TEXT = ("kill_process_tree", "sys.exit", "os._exit", "os.kill", "send_signal")
_PLACEHOLDER_RE = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdrfix]")


def template(node):
    """The literal text of a message expression with ``{}`` for its placeholders, else None (a variable)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _PLACEHOLDER_RE.sub("{}", node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template(node.left), template(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return template(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return template(node.func.value)
    return None


def _called_name(call):
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _ends_process(statements):
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and _called_name(node) in _ENDS_PROCESS:
                return True
    return False


def _statement_lists(tree):
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def _log_call(statement):
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _LOG_LEVELS and isinstance(func.value, ast.Name) \
            and func.value.id in ("logger", "logging") and call.args:
        return call
    return None


def _sources(wheel, wanted):
    with zipfile.ZipFile(str(wheel)) as archive:
        for name in sorted(archive.namelist()):
            if name.startswith("sglang/srt/") and name.endswith(".py") and wanted(name):
                yield name, archive.read(name).decode("utf-8", "replace")


def exit_messages(wheel):
    """The set of Message a release logs right before it ends its process (tree)."""
    found = set()
    for name, text in _sources(wheel, lambda _name: True):
        if not any(marker in text for marker in _ENDS_PROCESS_TEXT):
            continue
        for body in _statement_lists(ast.parse(text)):
            for index, statement in enumerate(body):
                call = _log_call(statement)
                if call is None:
                    continue
                after = body[index + 1:index + 4]
                if after and isinstance(after[0], ast.Raise):
                    continue
                message = template(call.args[0])
                if message is not None and _ends_process(after):
                    found.add(Message(name[len("sglang/srt/"):], message))
    return found


def _argument_handling(name):
    return name == "sglang/srt/server_args.py" or name.startswith("sglang/srt/arg_groups/")


def argument_raises(wheel):
    """The set of Raise of a release's argument handling (server_args.py, arg_groups/)."""
    found = set()
    for name, text in _sources(wheel, _argument_handling):
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                message = template(node.exc.args[0])
                if message is not None:
                    found.add(Raise(name[len("sglang/srt/"):], _called_name(node.exc), message))
            elif isinstance(node, ast.Assert) and node.msg is not None:
                message = template(node.msg)
                if message is not None:
                    found.add(Raise(name[len("sglang/srt/"):], "AssertionError", message))
    return found


def render(message, value="0"):
    """A message as a log would show it: every placeholder filled with ``value``."""
    return message.replace("{}", value)
