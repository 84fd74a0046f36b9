#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_gateway_rotation
short_description: Take SGLang workers out of the gateway's rotation and drain them, or put them back and prove it
version_added: 0.3.0
description:
  - The two steps of a rolling change around each batch of workers, each one call on the gateway's host, so that a batch
    costs the roll two round trips besides its change.
  - O(state=out) takes the O(workers) out of the gateway's rotation through its control plane (as
    M(llmops.sglang.sglang_gateway_workers) with O(llmops.sglang.sglang_gateway_workers#module:state=absent)), refusing
    first when fewer than O(min_in_service) workers would stay in rotation, confirms that the gateway no longer routes to
    them (removed, or C(draining)), then drains each server at once - as M(llmops.sglang.sglang_drain) does, read from
    the worker's URL (C(/metrics), or C(/get_load) with O(worker_api_key)) - until two readings in a row say nothing is
    in flight, or O(drain_timeout) and O(drain_policy) decide.
  - O(state=in) registers them again (with O(worker_api_key)), waits until the gateway reports each in rotation (ready,
    healthy, circuit not open), at most O(timeout) seconds, and proves for each that a request through the gateway
    reaches it (as M(llmops.sglang.sglang_gateway_route)).
  - Fails on a refusal, a failed drain (O(drain_policy=fail), or O(drain_policy=wait) past O(drain_max_wait)), a worker
    that does not return or that no request reaches; RV(ok), RV(drains) and RV(proofs) say what happened to each worker
    when the task is run with C(failed_when=false).
options:
  url:
    description: Base URL of the gateway, for example V(http://127.0.0.1:30080).
    type: str
    required: true
  admin_key:
    description: An admin key of the gateway's C(--control-plane-api-keys).
    type: str
  api_key:
    description: The gateway's C(--api-key), sent with the proof's requests.
    type: str
  worker_api_key:
    description: The workers' C(--api-key) (registration, C(/get_load)).
    type: str
  workers:
    description: The workers - URLs, or dicts with C(url), C(worker_type) and C(bootstrap_port).
    type: list
    elements: raw
    required: true
  state:
    description: V(out) of rotation (and drained), or V(in) (and proven).
    type: str
    choices: [out, in]
    required: true
  min_in_service:
    description: With O(state=out), workers that must stay in rotation (V(0) checks nothing).
    type: int
    default: 0
  drain:
    description:
      - With O(state=out) (and O(then_out)), drain each server here. V(false) - only take it out, confirm it and read
        once what it still has in flight (RV(drains), C(outcome) V(left)) - the drain is left to the change, which waits
        for it where it first changes what the server runs (the llmops.sglang.sglang_service role's
        C(sglang_service_drain), as llmops.sglang.roll does), so that its first steps run while the requests end.
    type: bool
    default: true
  drain_timeout:
    description: Seconds a drain may take before O(drain_policy) decides.
    type: float
    default: 120
  drain_policy:
    description: Past O(drain_timeout) - V(proceed), V(fail) or V(wait) (at most O(drain_max_wait)).
    type: str
    choices: [wait, proceed, fail]
    default: fail
  drain_max_wait:
    description: The hard bound of O(drain_policy=wait), in seconds.
    type: float
    default: 3600
  drain_source:
    description: Where a server's load is read - V(auto) (C(/metrics), else C(/get_load)), V(metrics), V(get_load).
    type: str
    choices: [auto, metrics, get_load]
    default: auto
  drain_interval:
    description: Seconds between two readings of a draining server while it still has requests in flight.
    type: float
    default: 0.1
  drain_idle_spacing:
    description:
      - Seconds between a reading that says nothing is in flight and the reading that confirms it (two in a row end the
        drain). Keeps a request that was on its way to the server when it left rotation from being missed, however short
        O(drain_interval) is.
    type: float
    default: 0.25
  poll_interval:
    description:
      - Seconds between two reads of the gateway's C(GET /workers) while waiting for it to report the workers out of
        (or back in) rotation. The call goes to the gateway's own host; smg registers a worker in the background and
        reported it 0.1-0.25 s after the registration in the measured rolls (with a 1 s poll each return waited 1 s).
    type: float
    default: 0.1
  timeout:
    description: With O(state=in), seconds the gateway may take to report the workers in rotation.
    type: float
    default: 120
  then_out:
    description:
      - With O(state=in), workers to take out of rotation and drain once every one of O(workers) is back and proven, in
        the same call (as O(state=out) with O(min_in_service), O(drain_timeout), O(drain_policy)) - the next batch of a
        rolling change. Nothing is taken out when a worker of O(workers) did not return or no request reached it.
      - What happened to them is RV(then), not a failure of this call.
    type: list
    elements: raw
    default: []
  prove:
    description: With O(state=in), prove that a request through the gateway reaches each worker.
    type: bool
    default: true
  attempts:
    description: Requests through the gateway at most, per worker, for the proof.
    type: int
    default: 12
  request_timeout:
    description: Seconds one request of the proof may take.
    type: float
    default: 60
  validate_certs:
    description: Verify TLS certificates of C(https) URLs.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: none
    details: A step of a rolling change; run the roll's plan (M(llmops.sglang.sglang_roll_plan)) to see what it would do.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Workers already out (or in) are left as they are; a second call only drains (or proves) again.
seealso:
  - module: llmops.sglang.sglang_gateway_workers
  - module: llmops.sglang.sglang_drain
  - module: llmops.sglang.sglang_gateway_route
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Out of rotation and drained (two minutes, then go on)
  llmops.sglang.sglang_gateway_rotation:
    url: http://127.0.0.1:30080
    admin_key: "{{ gateway_admin_key }}"
    workers: [http://10.0.0.12:30000]
    state: out
    min_in_service: 2
    drain_timeout: 120
    drain_policy: proceed

- name: Back into rotation, and a request through the gateway reaches it
  llmops.sglang.sglang_gateway_rotation:
    url: http://127.0.0.1:30080
    admin_key: "{{ gateway_admin_key }}"
    workers: [http://10.0.0.12:30000]
    state: in
'''

RETURN = r'''
ok:
  description: Whether the step did what it was asked for every worker.
  returned: always
  type: bool
removed:
  description: URLs taken out of rotation.
  returned: always
  type: list
  elements: str
added:
  description: URLs registered again.
  returned: always
  type: list
  elements: str
verdict:
  description: Whether the gateway reports the workers as asked (C(done)), else C(waiting) and C(failed) workers with their state.
  returned: always
  type: dict
waited:
  description: Seconds the gateway took to report the workers as asked.
  returned: always
  type: float
drains:
  description:
    - With O(state=out), one per worker - C(url), C(outcome) (V(idle), V(proceed), V(fail); V(left) with O(drain=false),
      its C(in_flight_at_start) read once), C(seconds), C(drained),
      C(in_flight_at_start), C(still_running), C(peak), C(source), C(policy), C(at_timeout) (in flight when
      O(drain_timeout) passed, V(null) when drained within it), C(reason) and the last readings.
  returned: always
  type: list
  elements: dict
proofs:
  description: With O(state=in), one per worker, as RV(llmops.sglang.sglang_gateway_route#module:proofs).
  returned: always
  type: list
  elements: dict
then:
  description:
    - With O(state=in) and O(then_out), once every worker was back and proven - the result of taking O(then_out) out of
      rotation and draining it, with the keys of an O(state=out) call (RV(ok), RV(removed), RV(verdict), RV(waited),
      RV(drains), RV(at), RV(msg)); a refusal or a failed drain is in it (RV(ok) false), and C(kind) for an error of the
      control plane.
  returned: when O(then_out) was taken out
  type: dict
at:
  description: Epoch seconds when the step ended (O(state=out)) or began (O(state=in)), on the gateway's host.
  returned: always
  type: float
msg:
  description: One line.
  returned: always
  type: str
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import ControlPlane, ControlPlaneError
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._drain import DrainSettings, at_bound
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._reconcile import Wanted
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._rotation import Refused, Rotation, drain_all, left_to_the_change, prove_all


def take_out(p, rotation, wanted, out):
    step = rotation.step(wanted, 'absent', 30.0, min_in_service=p['min_in_service'])
    out.update(removed=[w.url for w in step.changes.remove], waited=step.waited,
               verdict=dict(done=step.verdict.done, waiting=step.verdict.waiting, failed=step.verdict.failed))
    if not step.verdict.done:
        return 'the gateway still routes to %s' % ', '.join(step.verdict.waiting)
    out['at'] = time.time()
    if not p['drain']:
        out['drains'] = left_to_the_change([w.url for w in wanted], p['drain_source'], p['worker_api_key'], p['drain_policy'])
        return ''
    settings = DrainSettings(timeout=p['drain_timeout'], policy=p['drain_policy'], interval=p['drain_interval'],
                             max_wait=max(p['drain_max_wait'], p['drain_timeout']), idle_spacing=p['drain_idle_spacing'])
    drains = drain_all([w.url for w in wanted], settings, p['drain_source'], p['worker_api_key'])
    out['drains'] = [dict(url=url, **drains[url].to_json()) for url in (w.url for w in wanted)]
    out['at'] = time.time()
    failed = [d for d in out['drains'] if d['outcome'] == 'fail']
    return '; '.join('%s: %s' % (d['url'], d['reason']) for d in failed)


def put_in(p, rotation, wanted, out):
    out['at'] = time.time()
    step = rotation.step(wanted, 'present', p['timeout'], worker_api_key=p['worker_api_key'])
    out.update(added=[w.url for w in step.changes.add], waited=step.waited,
               verdict=dict(done=step.verdict.done, waiting=step.verdict.waiting, failed=step.verdict.failed))
    if not step.verdict.done:
        return 'after %.0fs the gateway does not report in rotation: %s' % (step.waited, step.verdict.summary())
    if p['prove']:
        proofs = prove_all(p['url'], [w.url for w in wanted], p['api_key'], p['attempts'], p['request_timeout'],
                           validate_certs=p['validate_certs'])
        out['proofs'] = [r.to_json() for r in proofs]
        return '; '.join('%s: %s' % (r.worker, r.reason) for r in proofs if not r.ok)
    return ''


def out_message(drains):
    if drains and all(d['outcome'] == 'left' for d in drains):
        return 'out of rotation, its change drains it: %s' % '; '.join(
            '%s %s in flight' % (d['url'], '?' if d['in_flight_at_start'] is None else d['in_flight_at_start']) for d in drains)
    return 'out of rotation and drained: %s' % '; '.join(
        '%s %s after %.1fs (%s request(s) drained%s)' % (
            d['url'], d['outcome'], d['seconds'], d['drained'],
            '; ' + at_bound(d['at_timeout'], d['policy']) if d['at_timeout'] is not None else '')
        for d in drains)


def empty_result():
    return dict(changed=False, ok=False, removed=[], added=[], waited=0.0, verdict={}, drains=[], proofs=[], at=time.time())


def then_take_out(p, rotation, wanted):
    """O(then_out) out of rotation and drained, as a call with state=out would: its result, never raised."""
    nxt = empty_result()
    try:
        problem = take_out(p, rotation, wanted, nxt)
    except Refused as err:
        problem = str(err)
    except ControlPlaneError as err:
        problem = str(err)
        nxt['kind'] = err.kind
    nxt['changed'] = bool(nxt['removed'])
    nxt['ok'] = not problem
    nxt['msg'] = problem or out_message(nxt['drains'])
    return nxt


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            admin_key=dict(type='str', no_log=True),
            api_key=dict(type='str', no_log=True),
            worker_api_key=dict(type='str', no_log=True),
            workers=dict(type='list', elements='raw', required=True),
            state=dict(type='str', choices=['out', 'in'], required=True),
            min_in_service=dict(type='int', default=0),
            drain=dict(type='bool', default=True),
            drain_timeout=dict(type='float', default=120.0),
            drain_policy=dict(type='str', choices=['wait', 'proceed', 'fail'], default='fail'),
            drain_max_wait=dict(type='float', default=3600.0),
            drain_source=dict(type='str', choices=['auto', 'metrics', 'get_load'], default='auto'),
            drain_interval=dict(type='float', default=0.1),
            drain_idle_spacing=dict(type='float', default=0.25),
            poll_interval=dict(type='float', default=0.1),
            timeout=dict(type='float', default=120.0),
            then_out=dict(type='list', elements='raw', default=[]),
            prove=dict(type='bool', default=True),
            attempts=dict(type='int', default=12),
            request_timeout=dict(type='float', default=60.0),
            validate_certs=dict(type='bool', default=True),
        ),
    )
    p = module.params
    try:
        wanted = [Wanted.from_option(item) for item in p['workers']]
        then_wanted = [Wanted.from_option(item) for item in p['then_out']]
    except ValueError as exc:
        module.fail_json(msg='workers: %s' % exc)
    if then_wanted and p['state'] != 'in':
        module.fail_json(msg='then_out goes with state=in (the workers to take out once these are back and proven)')
    rotation = Rotation(ControlPlane(p['url'], p['admin_key'], validate_certs=p['validate_certs']), interval=p['poll_interval'])
    out = empty_result()
    try:
        problem = (take_out if p['state'] == 'out' else put_in)(p, rotation, wanted, out)
    except Refused as err:
        module.fail_json(msg=str(err), **out)
    except ControlPlaneError as err:
        module.fail_json(msg=str(err), kind=err.kind, **out)
    out['changed'] = bool(out['removed'] or out['added'])
    if problem:
        module.fail_json(msg=problem, **out)
    out['ok'] = True
    if p['state'] == 'in' and then_wanted:
        out['then'] = then_take_out(p, rotation, then_wanted)
        out['changed'] = out['changed'] or out['then']['changed']
    if p['state'] == 'out':
        out['msg'] = out_message(out['drains'])
    else:
        proven = ', proven' if p['prove'] else ''
        out['msg'] = 'back in rotation after %.1fs%s: %s' % (out['waited'], proven, ', '.join(w.url for w in wanted))
    module.exit_json(**out)


if __name__ == '__main__':
    main()
