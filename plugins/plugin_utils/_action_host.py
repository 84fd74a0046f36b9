# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host as the steps of a role's action plugin see it (llmops.sglang.sglang_deploy, nvidia_driver_deploy): modules
and action plugins run through the action plugin for one host, one line per event on the terminal.

Controller side only. A module runs pipelined over the task's connection like the task's own module would (check mode,
no_log and diff follow the task; ``read_only`` runs a read in check mode too, ``secret`` adds no_log); an action plugin
(wait_for_sglang, sglang_host_lock, copy) runs with a copy of the task carrying its arguments, as ansible.builtin.template
runs copy; ``put`` sends a file as copy's action does, without looking at the host's copy first.
"""

from __future__ import annotations

import os
from typing import Any, Dict

from ansible.utils.display import Display
from ansible.utils.hashing import checksum

display = Display()


class ActionHost:
    """The host as a step sees it: modules and action plugins run through this action plugin, lines on the terminal."""

    def __init__(self, action: Any, task_vars: Dict[str, Any], name: str):
        self._action, self._vars, self.name = action, task_vars, name
        self.check_mode = bool(action._task.check_mode)

    def module(self, name: str, args: Dict[str, Any], secret: bool = False, read_only: bool = False) -> Dict[str, Any]:
        task = self._action._task
        saved = (task.no_log, task.check_mode)
        try:
            task.no_log = saved[0] or secret
            task.check_mode = saved[1] and not read_only
            res = self._action._execute_module(module_name=name, module_args=dict(args), task_vars=self._vars)
        finally:
            task.no_log, task.check_mode = saved
        res.pop('invocation', None)
        return res

    def scratch(self, name: str) -> str:
        """A path NAME inside the task's temporary directory on the host (made if the task has none yet; removed when
        the task ends): where a read in check mode keeps what its tool would otherwise write of the host's."""
        act = self._action
        shell = act._connection._shell
        if not shell.tmpdir:
            act._make_tmp_path()
        return shell.join_path(shell.tmpdir, name)

    def action(self, name: str, args: Dict[str, Any]) -> Dict[str, Any]:
        act = self._action
        task = act._task.copy()
        task.args = dict(args)
        plugin = act._shared_loader_obj.action_loader.get(name, task=task, connection=act._connection, play_context=act._play_context,
                                                          loader=act._loader, templar=act._templar, shared_loader_obj=act._shared_loader_obj)
        res = plugin.run(task_vars=self._vars)
        res.pop('invocation', None)
        return res

    def put(self, src: str, dest_dir: str, mode: str, directory_mode: str) -> Dict[str, Any]:
        """Send the controller's file SRC into the host's DEST_DIR (ending in /; created with DIRECTORY_MODE) as
        ansible.builtin.copy's action does for each file of a directory (transfer to the task's temporary directory,
        then the copy module), without its stat of the host's copy first: for a file the caller knows is not there.
        Not in check mode (nothing is sent; the caller compares instead)."""
        act = self._action
        shell = act._connection._shell
        if not shell.tmpdir:
            act._make_tmp_path()
        tmp_src = shell.join_path(shell.tmpdir, '.source')
        act._transfer_file(src, tmp_src)
        act._fixup_perms2((shell.tmpdir, tmp_src))
        return self.module('ansible.legacy.copy', {'src': tmp_src, 'dest': dest_dir, 'mode': mode, 'directory_mode': directory_mode,
                                                   '_original_basename': os.path.basename(src), 'checksum': checksum(src)})

    def say(self, text: str, detail: bool = False) -> None:
        """One line on the terminal; a ``detail`` (what went as expected, said again in the result) only with -v, and in
        the log file with ANSIBLE_LOG_VERBOSITY >= 1."""
        if detail:
            display.verbose('%s: %s' % (self.name, text), caplevel=0)
        else:
            display.display('%s: %s' % (self.name, text))
