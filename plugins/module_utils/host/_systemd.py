# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one ``systemctl show`` reader of the collection: the readiness wait, the deployment record and the run
offset all read a unit's properties through it.

Private module_utils: runs on the target host, Python 3.9+, standard library only. Parsing is a pure function of
the text, so it is tested on recorded output; reading takes a runner from ``_command``.
"""

from __future__ import annotations

# Properties that systemd prints as numbers; parsed to int (None when empty or not a number, e.g. "[not set]").
INT_PROPERTIES = frozenset(('NRestarts', 'ExecMainStatus', 'ExecMainCode', 'ExecMainPID', 'MainPID'))


class SystemdError(Exception):
    """``systemctl show`` could not be run or failed; ``msg`` says what and what to try."""

    def __init__(self, msg, rc=None):
        super().__init__(msg)
        self.msg = msg
        self.rc = rc


def show_argv(unit, properties, systemctl='systemctl'):
    """argv of ``systemctl show`` for the named ``properties`` of ``unit`` (``--`` so a name cannot be an option)."""
    return [systemctl, 'show', '--no-pager', '-p', ','.join(properties), '--', unit]


def parse_show(text):
    """``systemctl show`` KEY=VALUE output as a dict; the properties in INT_PROPERTIES become int (or None)."""
    props = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition('=')
        key = key.strip()
        if not sep or not key:
            continue
        value = value.strip()
        if key in INT_PROPERTIES:
            try:
                props[key] = int(value)
            except ValueError:
                props[key] = None
        else:
            props[key] = value
    return props


def show(unit, properties, run, systemctl='systemctl'):
    """The ``properties`` of ``unit`` now, as parse_show() gives them. ``run`` is a ``_command`` runner.

    Raises SystemdError when systemctl fails (not installed, no systemd running as PID 1). A unit that does not
    exist is not an error: systemd answers ``LoadState=not-found`` and ``ActiveState=inactive``.
    """
    rc, out, err = run(show_argv(unit, properties, systemctl))
    if rc != 0:
        raise SystemdError('systemctl show %s failed (rc=%s): %s. Is systemd running on the host (PID 1)?'
                           % (unit, rc, (err or out or '').strip()[-300:]), rc=rc)
    return parse_show(out)
