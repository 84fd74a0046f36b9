#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_restart
short_description: Restart an SGLang unit in one host-side step that a killed controller cannot cut
version_added: 0.2.0
description:
  - Reloads systemd, stops O(unit), checks that the stopped unit released its GPUs (the C(gpus) check of
    M(llmops.sglang.sglang_preflight) with O(llmops.sglang.sglang_preflight#module:unit_stopped=true)), measures the
    size of O(log_path), starts O(unit) and enables it, all in this one module process on the host.
  - A controller killed (SIGKILL of C(ansible-playbook)) or a link lost while the module runs cannot leave the unit
    stopped, because nothing between the stop and the start waits for the controller. The hang-up (C(SIGHUP)) and
    broken pipe (C(SIGPIPE)) of the lost SSH session are ignored from the stop to the start.
  - The log size is measured between the stop and the start, so the old run's shutdown lines stay before
    RV(log_size), the offset M(llmops.sglang.sglang_run_offset) keeps for the new run.
  - A failed GPU release check leaves the unit stopped and fails with the holder named. A start now would fail to
    allocate GPU memory.
options:
  unit:
    description: The server's systemd unit.
    type: str
    default: sglang.service
  log_path:
    description: The server's log file (its C(StandardOutput=append:) path). Empty measures nothing (RV(log_size) is V(null)).
    type: str
    default: ''
  run_file:
    description:
      - The run record of M(llmops.sglang.sglang_run_offset) (its O(llmops.sglang.sglang_run_offset#module:path)). Right
        after the start the new run's C(InvocationID) and RV(log_size) are recorded there, in this same process, so a
        rerun after a controller killed at any point finds the new run's first line. Empty records nothing.
    type: str
    default: ''
  daemon_reload:
    description: Run C(systemctl daemon-reload) first, so that a changed unit file is the one started.
    type: bool
    default: true
  reset_failed:
    description:
      - Run C(systemctl reset-failed) on O(unit) before the stop, so that the unit's C(StartLimitBurst=) counter of
        systemd's own restarts cannot refuse this deliberate start. A unit systemd has not loaded has nothing to reset
        (no failure). Any other failure fails the module with the unit not touched.
      - The P(llmops.sglang.sglang_service#role) role sets it with its C(sglang_service_preflight_enforce).
    type: bool
    default: false
    version_added: 0.3.0
  drain:
    description:
      - Before anything else, wait until the running server has nothing in flight, as M(llmops.sglang.sglang_drain) does
        (its running and waiting requests, from C(/metrics) or C(/get_load), two idle readings in a row) - for a server
        already out of its clients' way (the P(llmops.sglang.sglang_service#role) role's C(sglang_service_drain), which
        llmops.sglang.roll sets). Past O(drain.timeout) O(drain.policy) decides; a failed drain fails the module with
        nothing done (not even the daemon-reload) and RV(failed_step=drain).
    type: dict
    suboptions:
      url:
        description: The running server as this host reaches it.
        type: str
        required: true
      api_key:
        description: Its C(--api-key), for C(/get_load).
        type: str
      source:
        description: As M(llmops.sglang.sglang_drain)'s O(llmops.sglang.sglang_drain#module:source).
        type: str
        choices: [auto, metrics, get_load]
        default: auto
      timeout:
        description: Seconds the drain may take before O(drain.policy) decides.
        type: float
        default: 120
      policy:
        description: Past O(drain.timeout) - V(proceed), V(fail) or V(wait) (at most O(drain.max_wait)).
        type: str
        choices: [wait, proceed, fail]
        default: fail
      max_wait:
        description: The hard bound of O(drain.policy=wait), in seconds.
        type: float
        default: 3600
      interval:
        description: Seconds between two readings while requests are in flight.
        type: float
        default: 0.5
      idle_spacing:
        description: Seconds before a reading that confirms an idle one (default O(drain.interval)).
        type: float
      idle_readings:
        description: Idle readings in a row that end the drain.
        type: int
        default: 2
    version_added: 0.3.0
  enable:
    description: Enable O(unit) after its start.
    type: bool
    default: true
  release_check:
    description: Check after the stop that no process holds the server's GPUs any more.
    type: bool
    default: true
  user:
    description: The service user, for telling the server's orphans apart (the release check). Defaults to the unit's C(User=).
    type: str
  environment:
    description: The server's environment; its C(CUDA_VISIBLE_DEVICES) says which GPUs the release check looks at.
    type: dict
    default: {}
  cleanup:
    description: Stop the server's orphans still holding its GPUs after the stop (never another process).
    type: bool
    default: false
  stop_timeout:
    description: Seconds an orphan gets to exit after SIGTERM before it gets SIGKILL.
    type: float
    default: 10
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
  - llmops.sglang._release_check
attributes:
  check_mode:
    support: full
    details: Reports the steps it would run and the log size now; stops nothing.
  diff_mode:
    support: none
notes:
  - Needs root (C(become=true)).
  - A SIGKILL of the module process itself on the host (not of the controller) can still cut it; the next run's
    C(Enable and start SGLang) of the P(llmops.sglang.sglang_service#role) role starts the unit then.
seealso:
  - module: llmops.sglang.sglang_preflight
  - module: llmops.sglang.sglang_run_offset
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Restart SGLang in one step
  llmops.sglang.sglang_restart:
    unit: sglang.service
    log_path: /var/log/sglang/sglang.log
    run_file: /var/lib/sglang/sglang.run.json
    environment:
      CUDA_VISIBLE_DEVICES: "0,1"
    cleanup: true
  register: restart

- name: Find where the new run starts in the log
  llmops.sglang.sglang_run_offset:
    unit: sglang.service
    path: /var/lib/sglang/sglang.run.json
    log_size: "{{ restart.log_size }}"
  # the restart recorded the new run already: the offset is restart.log_size
'''

RETURN = r'''
msg:
  description: What the restart did, or what failed, what state the unit is in and what to do.
  returned: always
  type: str
  sample: restarted sglang.service (daemon-reload 0.1s, stop 1.2s, release 0.3s, measure 0.0s, start 0.1s, enable 0.2s)
log_size:
  description: Size in bytes of O(log_path) between the stop and the start; V(null) without O(log_path) or before the stop.
  returned: always
  type: int
  sample: 183204
steps:
  description: The steps in order with their exit code (V(null) in check mode), seconds and detail.
  returned: always
  type: list
  elements: dict
  sample: [{name: stop, rc: 0, seconds: 1.2, detail: ''}, {name: start, rc: 0, seconds: 0.1, detail: ''},
           {name: record, rc: 0, seconds: 0.0, detail: /var/lib/sglang/sglang.run.json}]
release:
  description: The GPU release check's result (the keys of M(llmops.sglang.sglang_preflight)'s result); V(null) when not run.
  returned: always
  type: dict
  sample: {ok: true, summary: 'gpus ok (2 GPUs, no other holder)', failed_checks: [], stopped: []}
previous_invocation:
  description: The unit's C(InvocationID) before the restart (empty when it was not running).
  returned: always
  type: str
  sample: 4f5b0a3c2d1e4f6a8b9c0d1e2f3a4b5c
invocation:
  description: The unit's C(InvocationID) after the restart.
  returned: always
  type: str
  sample: 9a8b7c6d5e4f30211f2e3d4c5b6a7980
active_state:
  description: The unit's C(ActiveState) after the restart.
  returned: always
  type: str
  sample: active
failed_step:
  description: The step that failed (V(drain), V(stop), V(release), V(start), ...); V(null) when the unit was restarted.
  returned: always
  type: str
  sample: null
drain:
  description:
    - With O(drain), the drain's result (as M(llmops.sglang.sglang_drain) returns it - C(outcome), C(seconds),
      C(in_flight_at_start), C(drained), C(still_running), C(at_timeout), C(policy), C(reason), the last readings);
      V(null) without it.
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._drain import DrainSettings, drain_server
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _host as ph
from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _restart as rs
from ansible_collections.llmops.sglang.plugins.module_utils.host import _systemd as systemd
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner


def drain(options):
    """The drain of O(drain)'s server, as M(llmops.sglang.sglang_drain) does it."""
    o = options
    settings = DrainSettings(timeout=o['timeout'], policy=o['policy'], interval=o['interval'], idle_readings=o['idle_readings'],
                             max_wait=max(o['max_wait'], o['timeout']), idle_spacing=o['idle_spacing'])
    return drain_server(o['url'], settings, o['source'], o['api_key']).to_json()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ph.gpu_check_options(),
            log_path=dict(type='str', default=''),
            run_file=dict(type='str', default=''),
            daemon_reload=dict(type='bool', default=True),
            reset_failed=dict(type='bool', default=False),
            enable=dict(type='bool', default=True),
            release_check=dict(type='bool', default=True),
            drain=dict(type='dict', options=dict(
                url=dict(type='str', required=True),
                api_key=dict(type='str', no_log=True),
                source=dict(type='str', choices=['auto', 'metrics', 'get_load'], default='auto'),
                timeout=dict(type='float', default=120.0),
                policy=dict(type='str', choices=['wait', 'proceed', 'fail'], default='fail'),
                max_wait=dict(type='float', default=3600.0),
                interval=dict(type='float', default=0.5),
                idle_spacing=dict(type='float'),
                idle_readings=dict(type='int', default=2),
            )),
        ),
        supports_check_mode=True,
    )
    p = module.params
    systemctl = module.get_bin_path('systemctl', required=True)
    run = module_runner(module)

    def show():
        try:
            return systemd.show(p['unit'], ('ActiveState', 'InvocationID'), run, systemctl)
        except systemd.SystemdError:
            return {}

    restarter = rs.Restarter(p['unit'], systemctl, run, lambda: ph.preflight(module, ph.release_params(p)), show, p['log_path'],
                             p['run_file'], drain=lambda: drain(p['drain']))
    steps = rs.plan(p['daemon_reload'], p['release_check'], p['log_path'], p['enable'], p['run_file'], p['reset_failed'],
                    drain=bool(p['drain']))
    result = restarter.preview(steps) if module.check_mode else restarter.restart(steps)
    returned = result.to_json()
    del returned['unit']
    if result.failed_step:
        # a failed drain is the first step: nothing was changed
        module.fail_json(changed=result.failed_step != 'drain', **returned)
    module.exit_json(changed=True, **returned)


if __name__ == '__main__':
    main()
