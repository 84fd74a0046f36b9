# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmops.sglang.brief: one screen per run at verbosity 0; ansible.builtin.default at -v and in the log file."""

from __future__ import annotations

DOCUMENTATION = r"""
name: brief
type: stdout
short_description: One screen per run (progress, one line per host per event, the table); the rest behind -v
version_added: 0.2.0
description:
  - >-
    The collection's own choice of screen output for its playbooks, off unless selected
    (C(ANSIBLE_STDOUT_CALLBACK=llmops.sglang.brief), or C(stdout_callback = llmops.sglang.brief) in the C([defaults])
    section of C(ansible.cfg)). C(bash demo/run.sh) selects it.
  - >-
    At verbosity 0 it prints one line per play, warnings and deprecations, what the collection's actions print
    themselves (the stages of each host's start as they come, the table that ends a deploy or check run), the
    messages of debug tasks (one line per host; a debug task with O(ansible.builtin.debug#module:verbosity=1) shows
    only with C(-v)), one line for the hosts that failed a task with the same message, unreachable hosts, diffs when
    C(--diff) asks for them, and the recap.
  - >-
    A failure that a rescue section of the play handles is not printed at verbosity 0 (the play handles it: the deploy
    and check playbooks put it in their table, the tune playbook rolls the variant back); neither is a failure with
    C(ignore_errors).
  - >-
    Task headers, C(ok), C(changed), C(skipped) and C(included) lines and result dumps are not printed at verbosity 0.
    When a log file is configured (C(log_path) in C(ansible.cfg), or C(ANSIBLE_LOG_PATH)) they are written there as
    ansible.builtin.default prints them; registered results hold the same data.
  - >-
    With C(-v) or more it prints what ansible.builtin.default prints, with the same options.
  - >-
    Why a callback of its own; ansible.builtin.default with O(display_ok_hosts=false) and
    O(display_skipped_hosts=false) still prints a task header and one line per host for every task that changed
    something (a first deploy changes 16 per host), each rescued failure as an error and a result block, and every
    include on ansible-core 2.19.
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
requirements:
  - selected as the stdout callback (see above)
author:
  - llmops.sglang contributors (@llmops)
"""

from contextlib import contextmanager

from ansible import constants as C
from ansible.plugins.callback.default import CallbackModule as DefaultCallback
from ansible.utils import display as display_module
from ansible.utils.display import Display
from ansible.utils.fqcn import add_internal_fqcns

from ansible_collections.llmops.sglang.plugins.plugin_utils._screen import (
    Failures, debug_lines, failure_message, first_line, handled_by_rescue)

DEBUG_ACTIONS = frozenset(add_internal_fqcns(('debug',)))
# Events ansible.builtin.default shows that this callback sends to the log file alone at verbosity 0 (the other events
# have methods of their own below).
LOGGED_EVENTS = ('v2_playbook_on_start', 'v2_playbook_on_include', 'v2_playbook_on_notify', 'v2_runner_on_start',
                 'v2_runner_on_skipped', 'v2_runner_item_on_failed', 'v2_runner_item_on_skipped', 'v2_runner_retry',
                 'v2_runner_on_async_poll', 'v2_runner_on_async_ok', 'v2_runner_on_async_failed')


class _DisplayProxy:
    """ansible-core's Display with some of its methods replaced."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)


class LogOnlyDisplay(_DisplayProxy):
    """ansible-core's Display, writing to the log file only; warnings and deprecations still reach the screen."""

    def display(self, msg, *args, **kwargs):
        if kwargs.pop('screen_only', False) or display_module.logger is None:
            return
        kwargs['log_only'] = True
        self._real.display(msg, *args, **kwargs)

    def banner(self, msg, color=None, cows=True):  # pylint: disable=unused-argument
        Display.banner(self, msg, color=color, cows=False)

    def _error(self, error, stderr=False):
        Display._error(self, error, stderr)  # pylint: disable=protected-access


class CompactDisplay(_DisplayProxy):
    """ansible-core's Display on the screen, without the blank lines around a banner (the recap at verbosity 0)."""

    def display(self, msg, *args, **kwargs):
        if msg.strip():
            self._real.display(msg, *args, **kwargs)

    def banner(self, msg, color=None, cows=True):  # pylint: disable=unused-argument
        self._real.display(msg.strip(), color=color)


class CallbackModule(DefaultCallback):
    """ansible.builtin.default, with the screen at verbosity 0 cut to what a person at the terminal acts on."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'stdout'
    CALLBACK_NAME = 'llmops.sglang.brief'

    def __init__(self):
        super().__init__()
        self._screen = self._display
        self._failures = Failures()
        self._started = None  # the task whose header was printed last

    # ---- plumbing
    def _brief(self):
        return self._screen.verbosity < 1

    @contextmanager
    def _log_only(self):
        self._display = LogOnlyDisplay(self._screen)
        try:
            yield
        finally:
            self._display = self._screen

    def quietly(self, method, *args, **kwargs):
        """The default callback's handling of an event: on the screen with -v, else into the log file only."""
        if not self._brief():
            return method(*args, **kwargs)
        with self._log_only():
            return method(*args, **kwargs)

    def _say(self, line, color=None, stderr=False):
        self._screen.display(line, color=color, stderr=stderr, screen_only=True)

    def _flush_failures(self):
        for line in self._failures.lines():
            self._say(line, color=C.COLOR_ERROR, stderr=self.get_option('display_failed_stderr'))

    # ---- plays and tasks
    def v2_playbook_on_play_start(self, play):
        self._flush_failures()
        self.quietly(super().v2_playbook_on_play_start, play)
        if self._brief():
            self._say('PLAY [%s]' % play.get_name().strip() if play.get_name().strip() else 'PLAY')

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._flush_failures()
        # ansible-core starts a meta task (end_role, end_host) once per host: one header for it, as for any task
        if getattr(task, '_uuid', None) is not None and task._uuid == self._started:
            return
        self._started = getattr(task, '_uuid', None)
        self.quietly(super().v2_playbook_on_task_start, task, is_conditional)

    def v2_playbook_on_handler_task_start(self, task):
        self._flush_failures()
        self.quietly(super().v2_playbook_on_handler_task_start, task)

    def v2_playbook_on_no_hosts_remaining(self):
        self._flush_failures()
        super().v2_playbook_on_no_hosts_remaining()

    def v2_playbook_on_stats(self, stats):
        self._flush_failures()
        if not self._brief():
            return super().v2_playbook_on_stats(stats)
        self._display = CompactDisplay(self._screen)
        try:
            return super().v2_playbook_on_stats(stats)
        finally:
            self._display = self._screen

    # ---- results
    def v2_runner_on_ok(self, result):
        if self._brief() and result.task.action in DEBUG_ACTIONS and not (result.task.loop and 'results' in result.result):
            for line in debug_lines(result.host.get_name(), result.result):
                self._say(line)
        self.quietly(super().v2_runner_on_ok, result)

    def v2_runner_item_on_ok(self, result):
        if self._brief() and result.task.action in DEBUG_ACTIONS:
            for line in debug_lines(result.host.get_name(), result.result):
                self._say(line)
        self.quietly(super().v2_runner_item_on_ok, result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if self._brief() and not ignore_errors and not handled_by_rescue(result.task):
            self._failures.add(result.task.get_name().strip(), result.host.get_name(), failure_message(result.result))
        self.quietly(super().v2_runner_on_failed, result, ignore_errors=ignore_errors)

    def v2_runner_on_unreachable(self, result):
        if self._brief():
            self._say('unreachable: [%s] %s: %s' % (result.host.get_name(), result.task.get_name().strip(),
                                                    first_line(result.result.get('msg')) or 'unreachable'),
                      color=C.COLOR_UNREACHABLE, stderr=self.get_option('display_failed_stderr'))
        self.quietly(super().v2_runner_on_unreachable, result)

    def v2_on_file_diff(self, result):
        # --diff asked for the diffs: on the screen, under the task's header
        if self._brief():
            self._last_task_banner = None
        super().v2_on_file_diff(result)


def _logged(name):
    def event(self, *args, **kwargs):
        return self.quietly(getattr(DefaultCallback, name).__get__(self), *args, **kwargs)
    event.__name__ = name
    event.__doc__ = 'ansible.builtin.default %s: on the screen with -v, else in the log file only.' % name
    return event


for _name in LOGGED_EVENTS:
    setattr(CallbackModule, _name, _logged(_name))
