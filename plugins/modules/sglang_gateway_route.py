#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_gateway_route
short_description: Prove that the SGLang model gateway routes requests to one worker and that they succeed
version_added: 0.3.0
description:
  - Run on the gateway's host after workers came back into rotation. For each of O(workers), in turn, sends small
    streamed C(/generate) requests through the gateway at O(url), one at a time, each with its own prompt, until that
    worker's own count of finished requests (SGLang's C(sglang:num_requests_total) on its C(/metrics); the server needs
    C(--enable-metrics)) has moved, at most O(attempts) requests per worker.
  - Fails when a request through the gateway fails (status, error and what came back are named), when none of the
    O(attempts) reached the worker, or when the worker exports no such counter.
  - The gateway does not say which worker answered a request (its C(X-SMG-Target-Worker) header works with the
    C(consistent_hashing) policy only), hence the worker's own counter. Other traffic can move the counter too; the
    proof then still holds that the gateway routes to the worker and that requests through it succeed.
options:
  url:
    description: Base URL of the gateway, for example V(http://127.0.0.1:30080).
    type: str
    required: true
  api_key:
    description: The gateway's C(--api-key) (what clients send).
    type: str
  workers:
    description: Base URLs of the workers as the gateway knows them (their C(/metrics) is read from there).
    type: list
    elements: str
    required: true
  attempts:
    description: Requests sent at most.
    type: int
    default: 12
  timeout:
    description: Seconds one request may take.
    type: float
    default: 60
  max_tokens:
    description: Tokens each request asks for.
    type: int
    default: 4
  validate_certs:
    description: Verify TLS certificates of C(https) URLs.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: The requests are sent in check mode too (a few tokens of work for the fleet).
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Never changes the hosts; the task never reports a change.
seealso:
  - module: llmops.sglang.sglang_gateway_workers
  - module: llmops.sglang.sglang_smoke
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: A request through the gateway reaches the worker that came back
  llmops.sglang.sglang_gateway_route:
    url: http://127.0.0.1:30080
    workers: [http://10.0.0.12:30000]
'''

RETURN = r'''
ok:
  description: Whether a request through the gateway reached every worker and every request succeeded.
  returned: always
  type: bool
proofs:
  description:
    - One per worker - C(worker), C(ok), C(requests) (sent through the gateway), C(finished_before) and
      C(finished_after) (the worker's C(sglang:num_requests_total)), C(ttft) (of the last request), C(seconds), C(reason).
  returned: always
  type: list
  elements: dict
  sample: [{worker: "http://10.0.0.12:30000", ok: true, requests: 2, finished_before: 40.0, finished_after: 41.0,
            ttft: 0.031, seconds: 0.4, reason: "2 request(s) through the gateway answered; ..."}]
msg:
  description: One line.
  returned: always
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._route import prove, read_finished, smoke_sender


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            workers=dict(type='list', elements='str', required=True),
            attempts=dict(type='int', default=12),
            timeout=dict(type='float', default=60.0),
            max_tokens=dict(type='int', default=4, no_log=False),
            validate_certs=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p['attempts'] < 1 or p['max_tokens'] < 1:
        module.fail_json(msg='attempts and max_tokens must be 1 or more, got %s and %s' % (p['attempts'], p['max_tokens']))
    proofs = []
    for worker in p['workers']:
        send = smoke_sender(p['url'], p['api_key'], p['timeout'], p['max_tokens'], worker, p['validate_certs'])
        proofs.append(prove(worker, send, lambda w=worker: read_finished(w), p['attempts']))
    ok = all(r.ok for r in proofs)
    out = dict(changed=False, ok=ok, proofs=[r.to_json() for r in proofs],
               msg='; '.join('%s: %s' % (r.worker, r.reason) for r in proofs) or 'no worker to prove')
    if not ok:
        module.fail_json(**out)
    module.exit_json(**out)


if __name__ == '__main__':
    main()
