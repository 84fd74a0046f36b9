#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_gateway_workers
short_description: Register SGLang workers with the SGLang model gateway, take them out of rotation, or read what it says
version_added: 0.3.0
description:
  - Talks to the control plane of the SGLang model gateway (C(smg), earlier C(sglang-router) 0.3.2 or later), its worker
    API C(GET /workers), C(POST /workers) and C(DELETE /workers/{id}), on the host the gateway runs on.
  - O(state=present) registers the O(workers) the gateway does not hold (and one it holds with another C(worker_type)
    or in its terminal C(failed) state again); with O(exclusive) it also removes every worker it holds that O(workers) does
    not name. O(state=absent) takes the O(workers) out of rotation (the gateway marks a removed worker C(draining) at once,
    so no policy selects it any more, and drops it after its C(drain_settle_secs); requests already routed to it run on;
    this module does not wait for them, M(llmops.sglang.sglang_drain) does). O(state=query) changes nothing.
  - With O(wait) it then polls C(GET /workers) until the gateway reports what was asked (O(state=present) - every worker
    C(ready), healthy and its circuit breaker not open; O(state=absent) - none of them routable any more), at most
    O(timeout) seconds, and fails naming each worker that is not there yet with its state. A gateway that does not
    answer yet (its unit is starting) is polled again within the same bound.
  - O(min_in_service) refuses a removal, before anything is changed, that would leave fewer workers in rotation (in a
    prefill/decode gateway, fewer of the smaller side).
  - RV(workers) lists every worker the gateway holds at the end, with its circuit-breaker state when O(metrics_url) is set.
options:
  url:
    description: Base URL of the gateway, for example V(http://127.0.0.1:30080).
    type: str
    required: true
  admin_key:
    description:
      - An admin key of the gateway's C(--control-plane-api-keys) (the part after the last C(:)), sent as bearer token.
        Without control-plane keys the gateway takes its C(--api-key) for these routes.
    type: str
  metrics_url:
    description:
      - The gateway's Prometheus endpoint (C(--prometheus-port)), for example V(http://127.0.0.1:29000/metrics); its
        C(smg_worker_cb_state) gives each worker's circuit-breaker state (V(closed), V(open), V(half_open)).
    type: str
  workers:
    description:
      - The workers this call is about; each a URL or a dict with C(url), C(worker_type) (V(regular), V(prefill),
        V(decode)) and, for a prefill worker, C(bootstrap_port).
    type: list
    elements: raw
    default: []
  worker_api_key:
    description: The workers' own C(--api-key), given to the gateway with each registration (never returned).
    type: str
  state:
    description: What the gateway should hold.
    type: str
    choices: [present, absent, query]
    default: present
  exclusive:
    description: With O(state=present), also remove every worker the gateway holds that O(workers) does not name.
    type: bool
    default: false
  wait:
    description: Wait until the gateway reports what O(state) asks for.
    type: bool
    default: true
  timeout:
    description: Seconds O(wait) may take, the gateway's own start included.
    type: float
    default: 120
  interval:
    description: Seconds between two reads of C(GET /workers) while waiting.
    type: float
    default: 1
  min_in_service:
    description:
      - With O(state=absent), refuse (before any change) a removal that leaves fewer workers in rotation than this.
        V(0) checks nothing.
    type: int
    default: 0
  validate_certs:
    description: Verify the TLS certificate of an C(https) O(url).
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: Reads the gateway's workers and returns RV(added) and RV(removed) as they would be; registers and removes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
notes:
  - The gateway keeps its workers in memory. The P(llmops.sglang.sglang_gateway#role) role also gives them to the gateway
    at its start, so a restarted gateway holds them again.
seealso:
  - module: llmops.sglang.sglang_drain
  - module: llmops.sglang.sglang_gateway_route
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Hold exactly the inventory's workers, and wait until every one is in rotation
  llmops.sglang.sglang_gateway_workers:
    url: http://127.0.0.1:30080
    admin_key: "{{ gateway_admin_key }}"
    workers: [http://10.0.0.11:30000, http://10.0.0.12:30000]
    exclusive: true

- name: Take one worker out of rotation, keeping at least two in service
  llmops.sglang.sglang_gateway_workers:
    url: http://127.0.0.1:30080
    admin_key: "{{ gateway_admin_key }}"
    workers: [http://10.0.0.11:30000]
    state: absent
    min_in_service: 2

- name: What the gateway thinks of its workers
  llmops.sglang.sglang_gateway_workers:
    url: http://127.0.0.1:30080
    admin_key: "{{ gateway_admin_key }}"
    metrics_url: http://127.0.0.1:29000/metrics
    state: query
  register: gateway
'''

RETURN = r'''
workers:
  description: Every worker the gateway holds at the end (after the wait).
  returned: always
  type: list
  elements: dict
  sample: [{url: "http://10.0.0.11:30000", id: "01a2...", worker_type: regular, status: ready, healthy: true, load: 2,
            version: 0.5.9, circuit: closed, in_rotation: true, state: ready}]
added:
  description: URLs registered (or that would be, in check mode).
  returned: always
  type: list
  elements: str
removed:
  description: URLs taken out (or that would be, in check mode).
  returned: always
  type: list
  elements: str
in_rotation:
  description: How many workers the gateway may route to at the end.
  returned: always
  type: int
  sample: 3
waited:
  description: Seconds spent waiting for the gateway to report what was asked.
  returned: always
  type: float
  sample: 1.2
ok:
  description: Whether the gateway reports what was asked (false on every failure; useful with C(failed_when=false)).
  returned: always
  type: bool
verdict:
  description: Whether the gateway reports what was asked (C(done)); else C(waiting) and C(failed) workers with their state.
  returned: always
  type: dict
  sample: {done: false, waiting: {"http://10.0.0.12:30000": "not ready"}, failed: {}}
msg:
  description: One line.
  returned: always
  type: str
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import ControlPlane, ControlPlaneError
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._reconcile import Wanted
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._rotation import Refused, Rotation


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            admin_key=dict(type='str', no_log=True),
            metrics_url=dict(type='str'),
            workers=dict(type='list', elements='raw', default=[]),
            worker_api_key=dict(type='str', no_log=True),
            state=dict(type='str', choices=['present', 'absent', 'query'], default='present'),
            exclusive=dict(type='bool', default=False),
            wait=dict(type='bool', default=True),
            timeout=dict(type='float', default=120.0),
            interval=dict(type='float', default=1.0),
            min_in_service=dict(type='int', default=0),
            validate_certs=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        wanted = [Wanted.from_option(item) for item in p['workers']]
    except ValueError as exc:
        module.fail_json(msg='workers: %s' % exc)
    plane = ControlPlane(p['url'], p['admin_key'], metrics_url=p['metrics_url'], validate_certs=p['validate_certs'])
    rotation = Rotation(plane, p['interval'])
    out = dict(changed=False, ok=False, added=[], removed=[], waited=0.0, workers=[], in_rotation=0,
               verdict=dict(done=True, waiting={}, failed={}))
    try:
        if p['state'] == 'query':
            step_workers = rotation.read(time.monotonic() + max(0.0, p['timeout']))
            done = dict(done=True, waiting={}, failed={})
        else:
            step = rotation.step(wanted, p['state'], p['timeout'], exclusive=p['exclusive'], min_in_service=p['min_in_service'],
                                 worker_api_key=p['worker_api_key'], check_mode=module.check_mode, wait=p['wait'])
            step_workers = step.workers
            done = dict(done=step.verdict.done, waiting=step.verdict.waiting, failed=step.verdict.failed)
            out.update(changed=step.changes.changed, added=[w.url for w in step.changes.add],
                       removed=[w.url for w in step.changes.remove], waited=step.waited)
    except Refused as err:
        module.fail_json(msg=str(err), **out)
    except ControlPlaneError as err:
        module.fail_json(msg=str(err), kind=err.kind, **out)
    out.update(workers=[w.to_json() for w in step_workers], in_rotation=sum(1 for w in step_workers if w.in_rotation),
               verdict=done)
    if p['wait'] and not done['done']:
        module.fail_json(msg='after %.0fs the gateway %s does not report %s: %s' % (
            out['waited'], p['url'], 'every worker in rotation' if p['state'] == 'present' else 'the workers out of rotation',
            ', '.join('%s %s' % kv for kv in sorted(dict(done['waiting'], **done['failed']).items()))), **out)
    out['ok'] = True
    what = {'present': 'in rotation', 'absent': 'out of rotation', 'query': 'held'}[p['state']]
    out['msg'] = '%s: %d worker(s) %s%s; %d in rotation' % (
        p['url'], len(wanted) if p['state'] != 'query' else len(step_workers), what,
        ' (added %s; removed %s)' % (', '.join(out['added']) or 'none', ', '.join(out['removed']) or 'none') if out['changed'] else '',
        out['in_rotation'])
    module.exit_json(**out)


if __name__ == '__main__':
    main()
