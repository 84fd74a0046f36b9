#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_startup_history
short_description: Keep a bounded history of SGLang starts on the host, compare a start with earlier ones, export metrics
version_added: 0.2.0
description:
  - With O(state=present), appends the record of one proven start to the history file O(path) (JSON, written atomically,
    at most O(keep) records), holding when it was recorded and when the unit started, the SGLang version, the configuration
    (a digest of O(config)), why it was started (O(reasons)), the seconds each startup stage took by SGLang's own log
    timestamps (from O(stages)), the smoke request's figures (O(smoke)) and whether the compile caches in O(caches) were
    warm or cold.
  - A start is recorded once; the unit's C(InvocationID) identifies it, so running the task again for the same start
    changes nothing.
  - 'Compares the start with the previous starts of the same configuration and names every stage that took at least twice
    as long as, and 10 seconds more than, the slowest of the last 5 (RV(comparison)), for example
    C(cuda_graph 4m10s, previous 3 starts 41-47 s: autotune or compile cache cold?).'
  - With O(metrics_path), writes the last start as Prometheus metrics for node_exporter's textfile collector
    (C(sglang_startup_seconds{stage=...}) and more; see RV(metrics)).
  - With O(state=query), reads the history and returns the last O(show) starts and the comparison of the newest one; it
    never writes.
  - A module of its own rather than part of M(llmops.sglang.sglang_deploy_stamp), because the deployment record is one proof of
    what the host runs now, rewritten by every deploy and compared exactly; the history is an append-only log with its own
    bound, read back by C(llmops.sglang.check) and exported to monitoring. Both live side by side in the working directory.
options:
  path:
    description: The history file, for example V(/var/lib/sglang/sglang.starts.json). Its directory must exist.
    type: path
    required: true
  state:
    description:
      - V(present) records a start (O(config) is required); V(query) only reads.
    type: str
    choices: [present, query]
    default: query
  unit:
    description:
      - The systemd unit of the server, for example V(sglang.service). Its C(InvocationID) identifies the start and its
        C(ExecMainStartTimestampMonotonic) tells which cache files existed before the start.
    type: str
  config:
    description:
      - What makes two starts comparable, as a dict (the P(llmops.sglang.sglang_service#role) role passes the SGLang version,
        the rendered server arguments, the plain environment, the extra pip packages, the SM120 patch state and the launch
        command). Only its sha256 is kept; do not put secrets into it anyway.
      - Required with O(state=present).
    type: dict
  sglang_version:
    description: The SGLang version that started.
    type: str
  reasons:
    description: "Why this start happened (the no-change check's reasons, for example V(inputs changed: sglang_service_args))."
    type: list
    elements: str
    default: []
  stages:
    description:
      - The RV(llmops.sglang.wait_for_sglang#module:stages) of the readiness wait that proved the start. Each stage's
        duration is the time from its line to the next stage's line by SGLang's own timestamps (C(log_elapsed)).
    type: list
    elements: dict
    default: []
  wait_elapsed:
    description: Seconds the readiness wait took (RV(llmops.sglang.wait_for_sglang#module:elapsed)).
    type: float
  smoke:
    description:
      - The result of M(llmops.sglang.sglang_smoke) after the start; C(ttft), C(total), C(tokens), C(model) and C(endpoint)
        are kept.
    type: dict
  caches:
    description:
      - Compile and JIT cache directories, name to path (the role passes the ones it points SGLang at). A directory with
        files older than the unit's start was warm; one whose files all appeared during the start was cold.
    type: dict
    default: {}
  keep:
    description: Records kept in O(path); the oldest are dropped.
    type: int
    default: 50
  show:
    description: Records returned in RV(records), newest first.
    type: int
    default: 5
  metrics_path:
    description:
      - Write the last start as Prometheus text exposition into this file, for node_exporter's textfile collector (a
        C(.prom) file in its C(--collector.textfile.directory)). Written atomically, mode C(0644).
      - Only with O(state=present).
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: O(state=present) reports whether it would record the start and writes nothing.
  diff_mode:
    support: full
    details: Shows the record that is added.
  idempotent:
    support: full
    details: A start (unit invocation) already recorded is not recorded again and the metrics file is rewritten only when
      its content differs.
notes:
  - Stage durations come from SGLang's own C([YYYY-MM-DD HH:MM:SS]) prefixes (one-second resolution), so they are the
    real startup times even when the wait started late; short stages jitter by a second.
seealso:
  - module: llmops.sglang.wait_for_sglang
  - module: llmops.sglang.sglang_smoke
  - module: llmops.sglang.sglang_deploy_stamp
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Record the start the readiness wait proved
  llmops.sglang.sglang_startup_history:
    path: /var/lib/sglang/sglang.starts.json
    state: present
    unit: sglang.service
    config:
      version: "0.5.9"
      args: "{{ my_server_args }}"
    sglang_version: "0.5.9"
    stages: "{{ sglang_wait.stages }}"
    smoke: "{{ smoke }}"
    caches:
      deep_gemm: /var/cache/sglang/0.5.9/deep_gemm
    metrics_path: /var/lib/node_exporter/textfile_collector/sglang.prom
  register: start_record

- name: Say how this start compares
  ansible.builtin.debug:
    msg: "{{ start_record.comparison.summary }}"

- name: Show the last three starts
  llmops.sglang.sglang_startup_history:
    path: /var/lib/sglang/sglang.starts.json
    show: 3
  register: starts
'''

RETURN = r'''
record:
  description: The start recorded (O(state=present)) or the newest one (O(state=query)); V(null) when there is none.
  returned: always
  type: dict
  sample: {recorded_at: "2026-12-01T13:50:02Z", started_at: "2026-12-01T13:49:20Z", unit: sglang.service,
           invocation: 4f5b0a3c2d1e4f6a8b9c0d1e2f3a4b5c, config: 3f9a1c0e7b2d4a61, sglang_version: 0.5.9,
           reasons: ["inputs changed: sglang_service_args"], stages: {init_distributed: 3.0, load_weights: 6.0},
           total: 17.0, wait_elapsed: 21.4, smoke: {ttft: 0.14, total: 0.61, tokens: 8, model: glm-5, endpoint: generate},
           caches: {state: warm, dirs: {}}}
comparison:
  description:
    - RV(record) beside the previous starts of the same configuration (at most 5, newest first). C(previous) is how many,
      C(slower) the much slower stages (C(stage), C(seconds), C(previous), C(hint)), C(ratio) the total startup time
      divided by the median of the previous ones, C(summary) a sentence for the log, C(short) a cell for a table.
  returned: always
  type: dict
  sample: {previous: 3, ratio: 2.1, short: "2.1x slower than the previous 3 starts: cuda_graph",
           summary: "cuda_graph 4m10s, previous 3 starts 41-47 s: autotune or compile cache cold?",
           slower: [{stage: cuda_graph, seconds: 250.0, previous: [41.0, 47.0, 44.0], hint: "autotune or compile cache cold?"}]}
records:
  description: The last O(show) starts, newest first.
  returned: always
  type: list
  elements: dict
  sample: []
lines:
  description: The last O(show) starts as one line each for a person (newest first), each compared with the starts before it.
  returned: always
  type: list
  elements: str
  sample: ["2026-12-01 13:50:02 SGLang 0.5.9 ready in 6m09s, smoke TTFT 0.052s, caches warm: 21.7x slower than the previous start: load_weights"]
count:
  description: Records in the history now.
  returned: always
  type: int
  sample: 12
damaged:
  description:
    - The history file when it was not one this collection wrote (not JSON, another format, a field of the wrong type,
      larger than 4 MiB), else V(null). It is renamed to C(<path>.damaged-<UTC time>) (the newest three are kept; not in
      check mode and not with O(state=query)) and the history starts anew; a warning says so.
  returned: always
  type: dict
  sample: {"path": "/var/lib/sglang/sglang.starts.json", "why": "records[0].total is a string, not a number",
           "kept_as": "/var/lib/sglang/sglang.starts.json.damaged-20261202T101500Z"}
metrics:
  description: The metrics text written to O(metrics_path); V(null) without it.
  returned: always
  type: str
  sample: "# HELP sglang_startup_seconds ...\n# TYPE sglang_startup_seconds gauge\nsglang_startup_seconds{unit=\"sglang.service\",stage=\"load_weights\"} 6.0\n"
msg:
  description: One line for a person.
  returned: always
  type: str
  sample: "start of sglang.service recorded (12 in the history): ready in 17 s; as fast as the previous 3 starts"
'''

import hashlib
import json
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _startup_history as sh
from ansible_collections.llmops.sglang.plugins.module_utils.host import _systemd as systemd
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner

SMOKE_KEYS = ('ok', 'ttft', 'total', 'tokens', 'model', 'endpoint')


def unit_start(module, unit):
    """(InvocationID, start as Unix seconds) of the unit's current run; (None, None) without a unit."""
    if not unit:
        return None, None
    try:
        props = systemd.show(unit, ('InvocationID', 'ExecMainStartTimestampMonotonic'), module_runner(module),
                             module.get_bin_path('systemctl', required=True))
    except systemd.SystemdError as err:
        module.fail_json(msg=err.msg)
    try:
        mono = int(props.get('ExecMainStartTimestampMonotonic') or 0) / 1e6
    except ValueError:
        mono = 0
    # systemd's monotonic clock is CLOCK_MONOTONIC, as Python's time.monotonic() on Linux
    started = time.time() - (time.monotonic() - mono) if mono > 0 else None
    return props.get('InvocationID') or None, started


def new_record(module, started):
    p = module.params
    durations, total = sh.stage_durations(p['stages'])
    invocation, epoch = started
    return sh.StartRecord(
        recorded_at=sh.utc_now(),
        config=hashlib.sha256(json.dumps(p['config'], sort_keys=True, default=str).encode('utf-8')).hexdigest()[:16],
        unit=p['unit'], invocation=invocation,
        started_at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch)) if epoch else None,
        sglang_version=p['sglang_version'], reasons=list(p['reasons']), stages=durations, total=total,
        wait_elapsed=p['wait_elapsed'],
        smoke=dict((k, (p['smoke'] or {}).get(k)) for k in SMOKE_KEYS) if p['smoke'] else None,
        caches=sh.cache_state(p['caches'], epoch) if p['caches'] else None)


def record_message(record, comparison, count, recorded):
    total = sh.seconds_text(record.total) if record.total is not None else 'an unknown time'
    head = 'start of %s %s (%d in the history)' % (record.unit or 'the server', 'recorded' if recorded else 'already recorded', count)
    smoke = record.smoke or {}
    ttft = ', smoke TTFT %.3fs' % smoke['ttft'] if smoke.get('ttft') is not None else ''
    caches = ', caches %s' % record.cache_state if record.cache_state else ''
    return '%s: ready in %s%s%s; %s' % (head, total, ttft, caches, comparison.summary)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            state=dict(type='str', choices=['present', 'query'], default='query'),
            unit=dict(type='str'),
            config=dict(type='dict'),
            sglang_version=dict(type='str'),
            reasons=dict(type='list', elements='str', default=[]),
            stages=dict(type='list', elements='dict', default=[]),
            wait_elapsed=dict(type='float'),
            smoke=dict(type='dict'),
            caches=dict(type='dict', default={}),
            keep=dict(type='int', default=50),
            show=dict(type='int', default=5),
            metrics_path=dict(type='path'),
        ),
        required_if=[('state', 'present', ('config',))],
        supports_check_mode=True,
    )
    p = module.params
    if p['keep'] < 1 or p['show'] < 0:
        module.fail_json(msg='keep must be 1 or more and show 0 or more, got %s and %s' % (p['keep'], p['show']))
    if p['metrics_path'] and not p['metrics_path'].endswith('.prom'):
        module.fail_json(msg='metrics_path %s must end in .prom: node_exporter\'s textfile collector reads only *.prom files'
                         % p['metrics_path'])
    try:
        # a query writes nothing: a damaged file is reported and left where it is
        history, damage = sh.read(p['path'], check_mode=module.check_mode or p['state'] == 'query')
        if damage:
            module.warn(damage.message('startup history'))
        damaged = damage.to_json() if damage else None
        if p['state'] == 'query':
            module.exit_json(damaged=damaged, **query_result(history, p['show']))
        module.exit_json(damaged=damaged, **present(module, history))
    except sh.HistoryError as err:
        module.fail_json(msg=err.msg, path=p['path'])


def query_result(history, show):
    newest = history.records[-1] if history.records else None
    comparison = sh.compare(newest, history.same_config(newest)) if newest else sh.Comparison(summary='no start recorded yet')
    return dict(changed=False, record=newest.to_json() if newest else None, comparison=comparison.to_json(),
                records=[r.to_json() for r in reversed(history.records[-show:])] if show else [],
                count=len(history.records), metrics=None, lines=history.lines(show),
                msg=(record_message(newest, comparison, len(history.records), False) if newest else 'no start recorded yet'))


def present(module, history):
    p = module.params
    record = new_record(module, unit_start(module, p['unit']))
    recorded = not history.knows(record)
    if recorded:
        updated = history.appended(record, p['keep'])
    else:
        updated = history
        record = [r for r in history.records if r.invocation == record.invocation and r.unit == record.unit][-1]
    comparison = sh.compare(record, updated.same_config(record))
    changed = recorded
    metrics = sh.prometheus_text(record, comparison, p['unit']) if p['metrics_path'] else None
    if metrics is not None and _current_text(p['metrics_path']) != metrics:
        changed = True
    if changed and not module.check_mode:
        if recorded:
            sh.write(p['path'], updated)
        if metrics is not None:
            sh.write_text(p['metrics_path'], metrics)
    result = dict(changed=changed, record=record.to_json(), comparison=comparison.to_json(),
                  records=[r.to_json() for r in reversed(updated.records[-p['show']:])] if p['show'] else [],
                  count=len(updated.records), metrics=metrics, lines=updated.lines(p['show']),
                  msg=record_message(record, comparison, len(updated.records), recorded))
    if module._diff:
        result['diff'] = dict(before='', after=json.dumps(record.to_json(), indent=1, sort_keys=True) + '\n' if recorded else '',
                              before_header=p['path'], after_header=p['path'])
    return result


def _current_text(path):
    try:
        with open(path, 'r', encoding='utf-8') as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


if __name__ == '__main__':
    main()
