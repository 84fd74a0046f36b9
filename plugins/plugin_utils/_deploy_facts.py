# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the steps of the sglang_service role observed on one host in one run: ``Facts``.

Controller side only. Each step of the role (llmops.sglang.sglang_deploy) fills its part from the results of the modules
it ran, secrets left out, and the role registers them inside its result (``sglang_service_result.facts``), where the next
step, and the same step on the other ranks of a multi-node deployment, read them. None means "the step did not run".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# What the public result carries as the facts hold it (sglang_service_result.wait, .preflight, ...): the registered result
# keeps it once, at its top level, and its facts name it in IN_RESULT (issue 21: after the verify step a result was about
# 28 KB of JSON, a third of it twice, which every later task's worker and ansible-playbook itself copy and pass on).
SHARED = ('wait', 'preflight', 'drain', 'sm120_patch', 'smoke', 'gate', 'benchmark', 'rollback', 'failure')
IN_RESULT = '_in_result'


@dataclass
class Facts:
    """One host's observations in this run; ``changed`` is true once any step changed the host."""

    server: str = ''                            # sglang_service_name of the run that observed these
    stamp: Optional[Dict[str, Any]] = None      # llmops.sglang.sglang_deploy_stamp, state=query
    unchanged: bool = False                     # the host (and every rank) still runs the recorded deployment
    deploy_reasons: List[str] = field(default_factory=list)
    lock_token: str = ''                        # llmops.sglang.sglang_host_lock
    deployed_over: str = ''                     # another run deployed while this one waited for the lock
    lock_waited: bool = False                   # this run waited for another run's host lock
    previous_version: str = ''                  # the SGLang version before this run's install (for a rollback)
    sglang_pending: bool = False                # check mode: pip would create or change the venv
    drain: Optional[Dict[str, Any]] = None      # llmops.sglang.sglang_drain, before this run changed what the server runs
    flags_checked: str = ''                     # the release whose wheel the server arguments were checked against
    preflight: Optional[Dict[str, Any]] = None  # llmops.sglang.sglang_preflight: ok, msg, summary, rank, stopped
    sm120_patch: Optional[Dict[str, Any]] = None  # llmops.sglang.sglang_patch_sm120's last run: state, version, sites
    caches: Optional[Dict[str, Any]] = None     # llmops.sglang.sglang_compile_cache: environment, dirs
    changes: List[str] = field(default_factory=list)          # what this run changed that the server runs, by name
    backups: List[Dict[str, Any]] = field(default_factory=list)  # {dest, backup_file, secret}: files this run replaced
    created: List[str] = field(default_factory=list)          # configuration files this run created
    key_file_kept: bool = False                 # the API-key file an emptied key removes was kept for a rollback
    own_reasons: List[str] = field(default_factory=list)      # this host's reasons to restart (the ranks read them)
    restart_reasons: List[str] = field(default_factory=list)  # why the server was (or would be) restarted
    startable: bool = True                      # the unit exists (check mode: a unit not installed yet cannot start)
    log_size: Optional[int] = None              # the log's size before the start
    restart: Optional[Dict[str, Any]] = None    # llmops.sglang.sglang_restart
    started: bool = False                       # the unit was started (it was not running) without a restart
    run_offset: Optional[int] = None            # llmops.sglang.sglang_run_offset
    wait: Optional[Dict[str, Any]] = None       # llmops.sglang.wait_for_sglang
    smoke: Optional[Dict[str, Any]] = None      # llmops.sglang.sglang_smoke
    history: Optional[Dict[str, Any]] = None    # llmops.sglang.sglang_startup_history
    gate: Optional[Dict[str, Any]] = None       # the benchmark gate's verdict
    benchmark: Optional[Dict[str, Any]] = None  # rank 0's last llmops.sglang.sglang_benchmark result
    rollback: Optional[Dict[str, Any]] = None   # what a rollback restored and how the previous configuration ended
    recorded: bool = False                      # the deployment record was written (a proven start)
    failure: Optional[Dict[str, Any]] = None    # {step, msg}: the step that failed before the start
    changed: bool = False

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Optional[Dict[str, Any]]) -> 'Facts':
        names = set(f.name for f in dataclasses.fields(cls))
        return cls(**dict((k, v) for k, v in (data or {}).items() if k in names))


def pack(facts: Dict[str, Any], public: Dict[str, Any]) -> Dict[str, Any]:
    """The facts as the role's result registers them beside PUBLIC (its public fields): what PUBLIC holds with the same
    value is left out and named in IN_RESULT. Pure."""
    out, shared = dict(facts), []
    for key in SHARED:
        if out.get(key) is not None and public.get(key) == out[key]:
            del out[key]
            shared.append(key)
    if shared:
        out[IN_RESULT] = shared
    return out


def unpack(result: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The facts of a registered result (pack's inverse); None when it has none. Pure."""
    facts = result.get('facts')
    if not isinstance(facts, dict):
        return None
    out = dict(facts)
    for key in out.pop(IN_RESULT, None) or ():
        if key in SHARED:
            out[key] = result.get(key)
    return out
