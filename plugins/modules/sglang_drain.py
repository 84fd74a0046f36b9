#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_drain
short_description: Wait until an SGLang server has no request in flight, read from the server itself
version_added: 0.3.0
description:
  - Run on the server's host after the server was taken out of the gateway's rotation (M(llmops.sglang.sglang_gateway_workers)
    O(llmops.sglang.sglang_gateway_workers#module:state=absent)), before a change restarts it. The gateway's own removal
    only waits a fixed C(drain_settle_secs); this reads what the server still has in flight.
  - Reads the server's running and waiting requests every O(interval) seconds, from C(/metrics) (C(sglang:num_running_reqs)
    plus C(sglang:num_queue_reqs), with C(--enable-metrics)) or from C(/get_load) (SGLang's list per DP rank; needs
    O(api_key) when the server has one), and ends when O(idle_readings) readings in a row say 0.
  - A server that refuses the connection has nothing in flight (it is not running); any other failed reading counts as
    busy, so a drain never ends on a guess.
  - Past O(timeout) (C(drain_timeout)) it says how many requests were still in flight and follows O(policy) - V(proceed)
    (return; what still runs ends through SGLang's own SIGTERM drain, or is cut when the unit's stop timeout kills it),
    V(fail) (fail the task; nothing was changed), V(wait) (keep waiting until idle, at most O(max_wait) seconds, then
    fail).
options:
  url:
    description: Base URL of the server, as seen from its host.
    type: str
    default: http://127.0.0.1:30000
  source:
    description:
      - Where the load is read. V(auto) reads C(/metrics) and falls back to C(/get_load) when the server exports no
        metrics (started without C(--enable-metrics)).
    type: str
    choices: [auto, metrics, get_load]
    default: auto
  api_key:
    description: The server's C(--api-key), needed for C(/get_load) (C(/metrics) is open).
    type: str
  timeout:
    description: Seconds the drain may take before O(policy) decides (the roll's C(drain_timeout)).
    type: float
    default: 120
  policy:
    description: What to do when requests are still in flight after O(timeout).
    type: str
    choices: [wait, proceed, fail]
    default: fail
  max_wait:
    description: With O(policy=wait), the hard bound in seconds after which the drain fails.
    type: float
    default: 3600
  interval:
    description: Seconds between two readings.
    type: float
    default: 0.5
  idle_spacing:
    description:
      - Seconds before a reading that confirms an idle one (default O(interval)), so that a short O(interval) ends the
        drain soon after the last request without shortening the time a request on its way has to show up.
    type: float
  idle_readings:
    description: Readings in a row that must say 0 (SGLang sets its metrics gauges at its own log intervals).
    type: int
    default: 2
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
    details: Reads only; it runs in check mode too.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Never changes the host; the task never reports a change.
seealso:
  - module: llmops.sglang.sglang_gateway_workers
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Drain the server, two minutes at most, then proceed with the change anyway
  llmops.sglang.sglang_drain:
    url: http://127.0.0.1:30000
    timeout: 120
    policy: proceed
  register: drain
'''

RETURN = r'''
outcome:
  description: V(idle) (drained), V(proceed) (past the bound, going on), V(fail) (past the bound).
  returned: always
  type: str
  sample: idle
seconds:
  description: How long the drain took.
  returned: always
  type: float
  sample: 2.4
in_flight_at_start:
  description: Requests in flight at the first reading (V(null) when unread).
  returned: always
  type: int
  sample: 3
drained:
  description: Requests that ended while the drain waited.
  returned: always
  type: int
  sample: 3
still_running:
  description: Requests still in flight when the drain ended (0 when idle).
  returned: always
  type: int
  sample: 0
peak:
  description: The most requests seen in flight.
  returned: always
  type: int
policy:
  description: The policy the drain followed past O(timeout) (V(wait), V(proceed), V(fail)).
  returned: always
  type: str
  sample: wait
at_timeout:
  description:
    - Requests in flight at the first reading past O(timeout) (V(null) when the server was idle within it). With
      O(policy=wait) and RV(outcome=idle) the drain waited on past its bound for them until the server was idle.
  returned: always
  type: int
  sample: 1
source:
  description: Where the load was read (V(metrics) or V(get_load)).
  returned: always
  type: str
readings:
  description: The last 20 readings (C(at) seconds, C(running), C(queued), C(error)).
  returned: always
  type: list
  elements: dict
reason:
  description: Why the drain ended.
  returned: always
  type: str
msg:
  description: One line.
  returned: always
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._drain import DrainSettings, drain_server


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', default='http://127.0.0.1:30000'),
            source=dict(type='str', choices=['auto', 'metrics', 'get_load'], default='auto'),
            api_key=dict(type='str', no_log=True),
            timeout=dict(type='float', default=120.0),
            policy=dict(type='str', choices=['wait', 'proceed', 'fail'], default='fail'),
            max_wait=dict(type='float', default=3600.0),
            interval=dict(type='float', default=0.5),
            idle_readings=dict(type='int', default=2),
            idle_spacing=dict(type='float'),
            validate_certs=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p['idle_readings'] < 1 or p['interval'] <= 0 or p['timeout'] < 0:
        module.fail_json(msg='idle_readings must be 1 or more, interval more than 0 and timeout 0 or more; got %s, %s, %s'
                         % (p['idle_readings'], p['interval'], p['timeout']))
    settings = DrainSettings(timeout=p['timeout'], policy=p['policy'], interval=p['interval'],
                             idle_readings=p['idle_readings'], max_wait=max(p['max_wait'], p['timeout']),
                             idle_spacing=p['idle_spacing'])
    result = drain_server(p['url'], settings, p['source'], p['api_key'])
    out = result.to_json()
    out['msg'] = '%s: %s after %.1fs: %s' % (p['url'], result.outcome, result.seconds, result.reason)
    if result.outcome == 'fail':
        module.fail_json(changed=False, **out)
    module.exit_json(changed=False, **out)


if __name__ == '__main__':
    main()
