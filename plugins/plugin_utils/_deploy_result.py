# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one public result of the sglang_service role, ``sglang_service_result``: what the run did to one server on one
host, built from what the role's steps observed (``Facts``) by pure rules.

Controller side only. The run report, the tune and roll playbooks and users read this result and nothing else the role
does; its fields are documented in the RETURN of ``plugins/modules/sglang_deploy.py`` and in docs/sglang_service.md, and
a field once published keeps its name and meaning.

``outcome`` says what the run did (the run report's RUN column):

* ``unchanged``: the host still ran exactly the last proven deployment; nothing was installed, written or restarted;
* ``started`` / ``restarted``: the server was started (it was not running) or restarted, and waited for;
* ``rolled back``: the new configuration failed (start, smoke request or benchmark gate) and the previous one was
  restored and started again;
* ``would deploy`` / ``would restart``: check mode: what a real run would do; nothing was changed;
* ``not started``: the run stopped before the start (a refused pre-flight, a failed install, arguments the release
  refuses), or deployed files that need no restart.

``status`` says how the server ended: ``ready``, a failed start's status (``crashed``, ``stalled``, ``timeout``, ``error``,
``unreachable``, ``rebooted``), ``failed`` (a step before the start, or the smoke request), ``regressed`` (the benchmark
gate rolled the change back), ``dry run`` (check mode) or ``not run`` (no readiness wait, ``sglang_service_wait: false``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts

OUTCOMES = ('unchanged', 'started', 'restarted', 'rolled back', 'would deploy', 'would restart', 'not started')
# A server in one of these states after the run is fine (the run report's "ok"): serving, or a dry run that changed
# nothing. "not run" (no readiness wait asked for) is not ok, and not a failure either.
OK_STATUSES = ('ready', 'dry run')
# The wait's statuses that are a failed start
FAILED_STARTS = ('crashed', 'stalled', 'timeout', 'error', 'unreachable', 'rebooted')


def _plain_dict(value: Any) -> Optional[Dict[str, Any]]:
    """A registered result as a dict, or None for nothing (absent, skipped, or an empty reset)."""
    if not isinstance(value, dict) or not value or value.get('skipped'):
        return None
    return dict(value)


@dataclass
class Server:
    """What the result says about the server itself, from the plan: its name and where it serves."""

    name: str = 'sglang'
    url: Optional[str] = None
    node_rank: int = 0
    deployment: Optional[str] = None


@dataclass
class ServiceResult:
    """``sglang_service_result``: see the module docstring for ``outcome`` and ``status``."""

    server: str
    outcome: str
    status: str
    changed: bool
    restarted: bool
    check_mode: bool
    msg: str
    reasons: List[str] = field(default_factory=list)
    restart_reasons: List[str] = field(default_factory=list)
    stage: Optional[str] = None
    signature: Optional[str] = None
    elapsed: Optional[float] = None
    url: Optional[str] = None
    node_rank: int = 0
    deployment: Optional[str] = None
    sglang_version: Optional[str] = None
    recorded_at: Optional[str] = None
    preflight: Optional[Dict[str, Any]] = None
    drain: Optional[Dict[str, Any]] = None
    sm120_patch: Optional[Dict[str, Any]] = None
    smoke: Optional[Dict[str, Any]] = None
    startup: Optional[Dict[str, Any]] = None
    gate: Optional[Dict[str, Any]] = None
    benchmark: Optional[Dict[str, Any]] = None
    wait: Optional[Dict[str, Any]] = None
    rollback: Optional[Dict[str, Any]] = None
    failure: Optional[Dict[str, Any]] = None
    deployed_over: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def outcome_of(facts: Facts, check_mode: bool) -> str:
    """What the run did, from what the steps observed (see the module docstring)."""
    if facts.unchanged:
        return 'unchanged'
    if facts.failure and not facts.restart:
        return 'not started'  # a refusal, in a dry run too: nothing would be done
    if check_mode:
        return 'would restart' if facts.restart_reasons and facts.startable else 'would deploy'
    if facts.rollback:
        return 'rolled back'
    restart = _plain_dict(facts.restart)
    if restart is not None and not restart.get('failed'):
        # the unit's InvocationID before the restart: empty when it was not running
        return 'restarted' if restart.get('previous_invocation') else 'started'
    if facts.started:
        return 'started'
    return 'not started' if facts.failure or facts.changed else 'unchanged'


def status_of(facts: Facts, check_mode: bool) -> str:
    """How the server ended (see the module docstring)."""
    if facts.unchanged:
        return 'ready'
    if facts.failure:
        return 'unreachable' if facts.failure.get('unreachable') else 'failed'
    if check_mode:
        return 'dry run'
    if facts.rollback:
        return facts.rollback.get('status') or 'failed'
    if (facts.gate or {}).get('failed'):
        return 'regressed'  # policy fail: the regressing change was left running and the run failed
    wait = _plain_dict(facts.wait)
    if wait is None or 'status' not in wait:
        return 'not run'
    smoke = _plain_dict(facts.smoke)
    if wait['status'] == 'ready' and smoke is not None and 'ok' in smoke and not smoke['ok']:
        return 'failed'
    return wait['status']


def _first_line(text: Any) -> str:
    lines = str(text or '').strip().splitlines()
    return lines[0].strip() if lines else ''


def failed_start_message(wait: Dict[str, Any], server: Server) -> str:
    """One line that says what and where: the stage, the signature, for a multi-node deployment which rank failed first,
    and the line that proved it."""
    status = wait.get('status') or 'failed'
    text = '%s at stage %s' % (status, wait.get('stage') or 'start')
    if wait.get('signature'):
        text += ': %s' % wait['signature']
    peer = wait.get('peer_failure') or {}
    if peer:
        text += ' because rank %s (%s) failed first' % (peer.get('node_rank'), peer.get('host'))
    if status == 'crashed':
        text += '; stopped %s.service' % server.name
    line = _first_line(wait.get('error_line'))
    if line:
        text += '; %s' % (line if len(line) <= 160 else line[:157] + '...')
    return text + ' (message, log tail and error context in sglang_service_result.wait)'


def message_of(facts: Facts, server: Server, outcome: str, status: str) -> str:
    """One line: what happened, for a person (the detail stays in the fields)."""
    stamp = _plain_dict(facts.stamp) or {}
    if facts.failure:
        # the whole message: it says what, why and what to try (the table shows its first line)
        return str(facts.failure.get('msg') or '').strip() or 'step %s failed' % facts.failure.get('step')
    if outcome == 'unchanged' and stamp.get('current'):
        serving = ', GET /health 200' if stamp.get('health') else ''
        return 'unchanged since %s (SGLang %s%s)' % (stamp.get('recorded_at'), stamp.get('sglang_version'), serving)
    if outcome in ('would deploy', 'would restart'):
        why = facts.restart_reasons if outcome == 'would restart' else facts.deploy_reasons
        what = 'would restart %s.service' % server.name if outcome == 'would restart' else 'would deploy'
        return '%s: %s' % (what, '; '.join(why)) if why else what
    if facts.rollback:
        return _first_line(facts.rollback.get('msg')) or 'rolled back'
    if (facts.gate or {}).get('failed'):
        return '%s: %s, a regression; left running (sglang_service_benchmark_policy=fail)' % (
            facts.gate.get('change'), facts.gate.get('headline'))
    wait = _plain_dict(facts.wait) or {}
    smoke = _plain_dict(facts.smoke) or {}
    if status == 'failed' and 'ok' in smoke and not smoke['ok']:
        # the module's own line: what failed, what was sent and what came back (the table keeps the short form)
        return _first_line(smoke.get('msg')) or 'smoke request failed: %s' % _first_line(smoke.get('error') or 'no answer')
    if status == 'ready':
        models = wait.get('models') or []
        serving = 'serving ' + ', '.join(models) if models else 'ready'
        return '%s; %s' % (serving, facts.deployed_over) if facts.deployed_over else serving
    if status in FAILED_STARTS and wait:
        return failed_start_message(wait, server)
    return _first_line(wait.get('msg')) or status


def service_result(facts: Facts, server: Server, check_mode: bool) -> ServiceResult:
    """The public result of one run of the role on one host."""
    outcome = outcome_of(facts, check_mode)
    status = status_of(facts, check_mode)
    wait = _plain_dict(facts.wait) or {}
    stamp = _plain_dict(facts.stamp) or {}
    history = _plain_dict(facts.history)
    restarted = outcome in ('restarted', 'started', 'rolled back')
    return ServiceResult(
        server=server.name, outcome=outcome, status=status, changed=bool(facts.changed), restarted=restarted,
        check_mode=bool(check_mode), msg=message_of(facts, server, outcome, status),
        reasons=list(facts.deploy_reasons), restart_reasons=list(facts.restart_reasons),
        stage=wait.get('stage') or ('ready' if outcome == 'unchanged' else None),
        signature=wait.get('signature'), elapsed=wait.get('elapsed'),
        url=server.url, node_rank=server.node_rank, deployment=server.deployment,
        sglang_version=stamp.get('sglang_version'), recorded_at=stamp.get('recorded_at'),
        preflight=_plain_dict(facts.preflight), drain=_plain_dict(facts.drain), sm120_patch=_plain_dict(facts.sm120_patch), smoke=_plain_dict(facts.smoke),
        startup=({'record': history.get('record'), 'comparison': history.get('comparison'), 'lines': history.get('lines')}
                 if history and history.get('record') else None),
        gate=_plain_dict(facts.gate), benchmark=_plain_dict(facts.benchmark), wait=_plain_dict(facts.wait),
        rollback=facts.rollback, failure=facts.failure, deployed_over=facts.deployed_over or None)
