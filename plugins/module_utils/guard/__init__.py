# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The runtime guard of one SGLang server: after the start, every interval, one round that observes, decides, acts
within bounds and reports (docs/guard.md).

What this package owns, one job a file:

* ``_config``: the guard's settings (``GuardConfig``), read from the JSON file the module writes, checked before use.
* ``_state``: what one round hands to the next (``GuardState``: failures in a row, restarts seen, the guard's own
  restarts, the Xid lines already seen, counters, the last events), kept in a JSON state file.
* ``_observe``: one round's observation of the host (the unit, ``/health``, one small bounded generation request,
  the unit's journal since the last round, the kernel log's Xid lines, the GPUs nvidia-smi lists).
* ``_decide``: the pure decision over it (healthy, starting, suspect, ``hung``, ``crash_loop``, ``gpu_fault``, held)
  and the action it allows (restart within its budget, stop, none).
* ``_gateway``: the worker out of the gateway's rotation before an action, back in after a proven start.
* ``_act``: the actions: a restart (stop, GPU release check, start, the readiness wait, a generation request) and a
  stop (never a start on a faulty GPU).
* ``_report``: the journal line of an event, the node_exporter textfile metrics, the summary ``check`` shows.
* ``_round``: one round, and the program's entry point on the host.
* ``_install``: what the ``sglang_guard`` module puts on the host: this package's own sources (read from the modules
  the module itself runs with), the entry program, the settings, the systemd service and timer.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
