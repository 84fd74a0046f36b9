# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What fills a host's row in the deploy and the check table: one Part per registered result, applied in order.

Each ``fill`` is a pure function of the row so far and one registered result. See ``_run_report`` for how to add a
column.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.llmops.sglang.plugins.plugin_utils._run_report import Column, HostRow, Part, first_sentence, one_line

# Set by the deploy and check playbooks' rescue when a task of the run failed: {task: name, msg: message}.
FAILURE_VAR = 'sglang_run_failure'


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict) and not value.get('skipped')


def fill_result(row: HostRow, result: Dict[str, Any]) -> None:
    """The sglang_service role's one result (sglang_service_result): what the run did (the row's kind, from the role's
    plan and what ran), how the server ended, whether the run changed the host, and why in one line."""
    if not _is_dict(result) or 'outcome' not in result:
        return
    row.kind = result['outcome']
    row.changed = bool(result.get('changed'))
    wait = result.get('wait')
    if _is_dict(wait) and 'status' in wait:
        fill_wait(row, wait)
    # a failed start says its root cause (the wait's crash line); everything else is the result's own line
    failed_start = _is_dict(wait) and row.status == result.get('status') and row.status != 'ready' and row.kind != 'rolled back'
    row.status = result.get('status') or row.status
    if row.kind == 'unchanged':
        row.stage = row.stage or 'ready'
    if not failed_start or not row.reason:
        row.reason = one_line(result.get('msg'))
    if result.get('failure'):
        failure = result['failure'] or {}
        # a host lost during a step: where its server is, nobody could see
        before = 'unknown' if failure.get('unreachable') else 'before start'
        row.stage = row.stage if row.stage and row.stage != 'ready' else before
        row.extra['failed_task'] = failure.get('what') or failure.get('step') or ''
    fill_smoke(row, result.get('smoke'))
    fill_startup(row, result.get('startup'))


def fill_wait(row: HostRow, wait: Dict[str, Any]) -> None:
    """llmops.sglang.wait_for_sglang's result: how the start ended, where, after how long, and why in one line."""
    if not _is_dict(wait) or 'status' not in wait:
        return
    row.status = wait['status']
    row.stage = wait.get('stage') or ''
    row.seconds = wait.get('elapsed')
    row.signature = wait.get('signature')
    if row.status == 'ready':
        models = wait.get('models') or []
        row.reason = 'serving ' + ', '.join(models) if models else 'ready'
    elif row.status == 'crashed':
        row.reason = one_line(_crash_line(wait))
    else:
        row.reason = one_line(_after_host(wait.get('msg')))


def _crash_line(wait: Dict[str, Any]) -> str:
    """The wait's root cause (the exception its message names), else the line that proves the crash, without
    SGLang's "[date time TPn]" prefix; the exit reason when there is neither."""
    line = (wait.get('root_cause') or wait.get('error_line') or '').strip()
    if line.startswith('[') and '] ' in line:
        line = line.split('] ', 1)[1]
    if line:
        return line
    exited = wait.get('exited') or {}
    return exited.get('reason') or _after_host(wait.get('msg'))


def _after_host(msg: Optional[str]) -> str:
    """'SGLang on node1 stalled at ...' -> 'stalled at ...' (the host is the row's first cell)."""
    text = msg or ''
    if text.startswith('SGLang on '):
        parts = text.split(' ', 3)
        text = parts[3] if len(parts) > 3 else text
    return text


def fill_failure(row: HostRow, failure: Dict[str, Any]) -> None:
    """A task of the run failed. A failed start is already described by the wait; anything else is said here."""
    if not _is_dict(failure):
        return
    if row.status not in ('ready', 'not run', 'dry run'):
        return
    row.status = 'failed'
    row.stage = row.stage if row.stage and row.stage != 'ready' else 'before start'
    row.extra['failed_task'] = failure.get('task') or ''
    row.reason = first_sentence(failure.get('msg')) or 'task %r failed' % row.extra['failed_task']


def _ttft(value: Any) -> str:
    return '' if value is None else '%.3fs' % float(value)


def fill_smoke(row: HostRow, smoke: Dict[str, Any]) -> None:
    """llmops.sglang.sglang_smoke (after the start, or in the check): its time to first token; a request that failed or
    hung fails a ready row, with the module's error (what was sent is in the registered result)."""
    if not _is_dict(smoke) or 'ok' not in smoke:
        return
    row.extra['ttft'] = smoke.get('ttft') if smoke.get('ok') else None
    # the table says it short; the role's result (its failure message) says what was sent and what came back
    if not smoke.get('ok') and (row.ok or row.status == 'failed'):
        row.status = 'failed'
        row.reason = one_line('smoke request: %s' % (smoke.get('error') or smoke.get('msg') or 'failed'))


def fill_startup(row: HostRow, history: Dict[str, Any]) -> None:
    """llmops.sglang.sglang_startup_history: the start beside earlier starts of its configuration, in a few words
    ("14.2x slower than the previous start: load_weights, kv_cache")."""
    if not _is_dict(history) or not history.get('record'):
        return
    row.extra['startup'] = (history.get('comparison') or {}).get('short') or ''
    if history.get('lines'):
        # the check's read-back: the last starts, one line each, in the returned rows (-e sglang_report_query)
        row.extra['starts'] = list(history['lines'])


SMOKE_COLUMNS = (Column('ttft', 'TTFT', _ttft, right=True),)
STARTUP_COLUMNS = (Column('startup', 'STARTUP'),)


def fill_driver(row: HostRow, driver: Dict[str, Any]) -> None:
    """The nvidia_driver role's result: a run that changed the driver changed the host (the PLAY RECAP counts it)."""
    if _is_dict(driver) and driver.get('changed'):
        row.changed = True


# The roles' public results; sglang_service_result.outcome is the row's kind (RUN).
RESULT_VAR = 'sglang_service_result'
DEPLOY_PARTS: Tuple[Part, ...] = (
    Part(RESULT_VAR, fill_result, (Column('kind', 'RUN', after='status'),) + SMOKE_COLUMNS + STARTUP_COLUMNS),
    Part('nvidia_driver_result', fill_driver),
    Part(FAILURE_VAR, fill_failure),
)


# systemd's ActiveState of a unit that runs nothing (not even a start in progress)
STOPPED_STATES = ('inactive', 'failed')


def fill_check_ready(row: HostRow, ready: Dict[str, Any]) -> None:
    """The check playbook's single readiness probe: no start happened, so no time, and the /health answer is the reason.

    A server that answered /health before any startup line was read stays at stage start, which says nothing about
    it: the stage is left empty then.
    """
    if not _is_dict(ready):
        return
    fill_wait(row, ready)
    row.seconds, row.changed = None, False
    if row.stage in ('start', 'unknown'):
        row.stage = ''
    health = ((ready.get('http') or {}).get('health') or {})
    answer = health.get('status') or health.get('error')
    unit = ready.get('unit') if _is_dict(ready.get('unit')) else {}
    if row.status == 'starting' and unit.get('ActiveState') in STOPPED_STATES:
        # one probe decides nothing about a start, but a unit that is not running is not starting (a newcomer's
        # 'systemctl stop' showed as starting)
        row.status = 'stopped'
        row.reason = one_line('the unit is %s (%s)%s' % (unit.get('ActiveState'), unit.get('Result') or unit.get('SubState') or '?',
                                                         '; GET /health %s' % answer if answer else ''))
    elif row.status in ('ready', 'starting'):
        row.reason = 'GET /health %s' % answer if answer else row.status


def fill_check_driver(row: HostRow, driver: Dict[str, Any]) -> None:
    """Driver drift fails the check even when the server still serves."""
    if not _is_dict(driver) or 'match' not in driver:
        return
    row.extra['driver'] = 'match' if driver['match'] else 'drift'
    if driver['match'] is False:
        row.status = 'failed' if row.ok else row.status
        row.reason = one_line('driver: %s' % driver.get('msg'))


def fill_check_preflight(row: HostRow, checked: Dict[str, Any]) -> None:
    """The pre-flight a deploy runs (llmops.sglang.sglang_preflight through the role's step), read-only: "ok", or the
    checks that failed; a failed one fails the check."""
    preflight = checked.get('preflight') if _is_dict(checked) and 'preflight' in checked else checked
    if not _is_dict(preflight) or 'ok' not in preflight:
        return
    failed = preflight.get('failed_checks') or []
    row.extra['preflight'] = 'failed: %s' % ', '.join(failed) if failed else 'ok'
    if failed:
        problems = ((preflight.get('checks') or {}).get(failed[0]) or {}).get('problems') or [preflight.get('msg')]
        row.status = 'failed' if row.ok else row.status
        row.reason = first_sentence('%s: %s' % (failed[0], problems[0]))


# The check asks in check mode: a site the module "applied" is one a deploy would apply (drift), "already_applied" is in place
CHECK_PATCH_WORDS = {'applied': 'to apply', 'reverted': 'to revert', 'already_applied': 'applied'}


def fill_check_patch(row: HostRow, patch: Dict[str, Any]) -> None:
    """The SM120 patch sites counted by status, "3 applied, 1 unsupported" or "3 to apply" (drift from the inventory's
    state; the sites are in check_patch.sites). Nothing when the inventory does not manage the patches."""
    if not _is_dict(patch) or patch.get('skipped'):
        return
    counts: Dict[str, int] = {}
    for site in patch.get('sites') or []:
        status = CHECK_PATCH_WORDS.get(str(site.get('status')), str(site.get('status')))
        counts[status] = counts.get(status, 0) + 1
    row.extra['sm120'] = ', '.join('%d %s' % (n, status) for status, n in sorted(counts.items())) or one_line(patch.get('msg'), 40)


def fill_gateway(row: HostRow, seen: Dict[str, Any]) -> None:
    """What the SGLang model gateway thinks of this host's server (the check's ``check_gateway``: the gateway's entry for
    the worker's URL, or ``{'state': 'not registered'}``); shown beside what the host says, it fails nothing."""
    if not _is_dict(seen) or not seen.get('state'):
        return
    row.extra['gateway'] = seen['state']
    row.extra['gateway_worker'] = dict((k, seen.get(k)) for k in ('url', 'status', 'healthy', 'circuit', 'load', 'in_rotation')
                                       if k in seen)


def fill_guard(row: HostRow, guard: Dict[str, Any]) -> None:
    """The runtime guard (llmops.sglang.sglang_guard, state query): its counts in a few words, and its last events one
    line each in the returned rows (-e sglang_report_query); it fails nothing (a server it holds stopped is not ready)."""
    if not _is_dict(guard) or guard.get('summary') in (None, 'not installed'):
        return
    row.extra['guard'] = guard['summary']
    events = (guard.get('guard') or {}).get('events') or []
    row.extra['guard_events'] = [_guard_event_line(e) for e in events]


def _guard_event_line(event):
    outcome = '; %s' % event['outcome'] if event.get('outcome') else ''
    return '%s %s -> %s: %s%s' % (event.get('at'), event.get('kind'), event.get('action'), event.get('reason'), outcome)


CHECK_PARTS: Tuple[Part, ...] = (
    Part('check_ready', fill_check_ready),
    Part('check_driver', fill_check_driver, (Column('driver', 'DRIVER'),)),
    Part('check_preflight', fill_check_preflight, (Column('preflight', 'PRE-FLIGHT'),)),
    Part('check_patch', fill_check_patch, (Column('sm120', 'SM120 PATCH'),)),
    Part('check_smoke', fill_smoke, SMOKE_COLUMNS),
    Part('check_starts', fill_startup, STARTUP_COLUMNS),
    Part('check_gateway', fill_gateway, (Column('gateway', 'GATEWAY'),), optional=True),
    Part('check_guard', fill_guard, (Column('guard', 'GUARD'),), optional=True),
    Part(FAILURE_VAR, fill_failure),
)

KINDS = {'deploy': DEPLOY_PARTS, 'check': CHECK_PARTS}


def build_row(host: str, facts: Dict[str, Any], parts: Tuple[Part, ...], reached: bool) -> HostRow:
    """The row of one host from its registered results (``facts``: var -> value, missing vars left out)."""
    row = HostRow(host=host)
    if not reached:
        row.status = 'unreachable'
        row.reason = 'no result: the host could not be reached (or failed outside the deploy tasks); see its error above'
        return row
    for part in parts:
        if part.var in facts:
            part.fill(row, facts[part.var])
    return row


def build_rows(hosts: List[str], facts_of: Dict[str, Dict[str, Any]], parts: Tuple[Part, ...], reached: List[str]) -> List[HostRow]:
    return [build_row(h, facts_of.get(h, {}), parts, h in reached) for h in hosts]
