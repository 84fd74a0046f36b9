#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_smoke
short_description: Send one small streamed generation request to an SGLang server and time it
version_added: 0.2.0
description:
  - Proves that a ready SGLang server generates now. A readiness wait (M(llmops.sglang.wait_for_sglang)) proves that the
    server started and answers C(GET /health); a server whose scheduler died can keep doing that while every request
    hangs.
  - Sends one greedy request (temperature 0) for O(max_tokens) tokens to SGLang's native C(/generate) or its OpenAI
    C(/v1/completions) or C(/v1/chat/completions), streamed, with the API key when O(api_key) is set, and reports the
    time to the first token (RV(ttft)), the total time (RV(total)), the tokens generated (RV(tokens)) and the model id
    that answered (RV(model)).
  - Fails when the server answers with an error, when the stream ends without a token, or when the whole exchange does
    not end within O(timeout) seconds (a hang); the failure names the request that was sent (RV(sent)) and what came back
    (RV(status), RV(received)).
  - The P(llmops.sglang.sglang_service#role) role runs it after every start it proved (on node rank 0 of a multi-node
    deployment, the only rank that serves HTTP) and the C(llmops.sglang.check) playbook on every host.
  - A module of its own rather than a mode of M(llmops.sglang.wait_for_sglang), because it does one thing the wait does not,
    it sends work to the server. The wait only watches (log, unit, C(GET) probes) and runs in rounds driven by its action
    plugin; the smoke request is one bounded exchange, also useful on its own (check playbook, after a rolling restart).
options:
  url:
    description:
      - Base URL of the server, for example V(http://127.0.0.1:30000). For a multi-node deployment, the URL of node rank 0.
    type: str
    required: true
  endpoint:
    description:
      - V(generate) is SGLang's native C(POST /generate) (C(text), C(sampling_params), C(stream)); the answering model id is
        then read from C(GET /v1/models).
      - V(completions) and V(chat_completions) are the OpenAI-compatible C(POST /v1/completions) and
        C(POST /v1/chat/completions), with C(stream_options.include_usage) so the token count comes from the server.
    type: str
    choices: [generate, completions, chat_completions]
    default: generate
  prompt:
    description: The prompt (V(chat_completions) sends it as one user message).
    type: str
    default: The capital of France is
  max_tokens:
    description: Tokens to generate (C(max_new_tokens) for V(generate), C(max_tokens) for the OpenAI endpoints).
    type: int
    default: 8
  timeout:
    description:
      - Seconds the whole exchange may take (model lookup, connect, first token, every further token). A request that has
        not ended by then is a hang and fails the task.
    type: float
    default: 60
  api_key:
    description: The server's C(--api-key), sent as C(Authorization) bearer token.
    type: str
  model:
    description:
      - Model id to put into an OpenAI request. Default is the first id C(GET /v1/models) lists (the server's
        C(--served-model-name)).
    type: str
  validate_certs:
    description: Verify the TLS certificate of an C(https) O(url).
    type: bool
    default: true
  disaggregation_mode:
    description:
      - The server's C(--disaggregation-mode). A V(prefill) or V(decode) server of a prefill/decode disaggregated deployment
        serves only requests that carry bootstrap information (a PD gateway adds it); the request then carries SGLang's
        own C(bootstrap_host=2.2.2.2), C(bootstrap_room=0), with which SGLang's warmup and C(/health_generate) run on such
        a server without a peer.
    type: str
    choices: ['null', prefill, decode]
    default: 'null'
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: The request is sent in check mode too; it changes nothing on the host (one short generation).
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Never changes the host; the task never reports a change.
notes:
  - The request costs the server one short generation. Run it where a few tokens of load do not matter (after a start,
    in a check), not in a tight loop.
  - RV(ttft) is measured from sending the request to the first event that carries generated text, on the host the module
    runs on; it includes the prefill of the prompt and, for V(generate), no model lookup.
seealso:
  - module: llmops.sglang.wait_for_sglang
  - module: llmops.sglang.sglang_startup_history
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Prove that the server generates
  llmops.sglang.sglang_smoke:
    url: http://127.0.0.1:30000
    api_key: "{{ sglang_api_key }}"
    timeout: 30
  register: smoke

- name: Show the time to the first token
  ansible.builtin.debug:
    msg: "{{ smoke.model }}: first token after {{ smoke.ttft }}s, {{ smoke.tokens }} tokens in {{ smoke.total }}s"

- name: Smoke the OpenAI chat endpoint with a named model
  llmops.sglang.sglang_smoke:
    url: http://127.0.0.1:30000
    endpoint: chat_completions
    model: glm-5
    max_tokens: 4
'''

RETURN = r'''
ok:
  description: Whether at least one token arrived and the stream ended within O(timeout).
  returned: always
  type: bool
  sample: true
ttft:
  description: Seconds from sending the request to the first generated text; V(null) when none arrived.
  returned: always
  type: float
  sample: 0.142
total:
  description: Seconds the whole exchange took (for a hang, about O(timeout)).
  returned: always
  type: float
  sample: 0.611
tokens:
  description: Tokens generated (the server's own count when it sent one, else the events that carried text).
  returned: always
  type: int
  sample: 8
model:
  description: The model id that answered (OpenAI C(model) field, or the first id of C(GET /v1/models)); V(null) when unknown.
  returned: always
  type: str
  sample: glm-5
text:
  description: The generated text.
  returned: always
  type: str
  sample: " Paris. The capital of Germany"
endpoint:
  description: The endpoint option used.
  returned: always
  type: str
  sample: generate
url:
  description: The URL the request went to.
  returned: always
  type: str
  sample: http://127.0.0.1:30000/generate
status:
  description: HTTP status of the generation request; V(null) when no status line came back (a hang or a refused connection).
  returned: always
  type: int
  sample: 200
sent:
  description: The request that was sent (C(method), C(url), C(body)); the API key is never included.
  returned: always
  type: dict
  sample: {method: POST, url: "http://127.0.0.1:30000/generate",
           body: {text: The capital of France is, stream: true, sampling_params: {max_new_tokens: 8, temperature: 0}}}
received:
  description: The first bytes (at most 2 KiB) of what came back.
  returned: always
  type: str
  sample: 'data: {"text": " Paris", "meta_info": {"completion_tokens": 1}}'
error:
  description: Why the request failed; V(null) when RV(ok).
  returned: always
  type: str
  sample: "no complete answer within 10s, HTTP 200 but not one token: the request hung (...)"
msg:
  description: One line saying what was sent and what came back.
  returned: always
  type: str
  sample: "smoke request answered by glm-5: first token after 0.142s, 8 token(s) in 0.611s (POST http://127.0.0.1:30000/generate ...)"
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.sglang._smoke import ENDPOINTS, SmokeRequest, run_smoke


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            endpoint=dict(type='str', choices=sorted(ENDPOINTS), default='generate'),
            prompt=dict(type='str', default='The capital of France is'),
            max_tokens=dict(type='int', default=8, no_log=False),
            timeout=dict(type='float', default=60.0),
            api_key=dict(type='str', no_log=True),
            model=dict(type='str'),
            validate_certs=dict(type='bool', default=True),
            disaggregation_mode=dict(type='str', choices=['null', 'prefill', 'decode'], default='null'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p['url'].startswith(('http://', 'https://')):
        module.fail_json(msg='url %r must start with http:// or https://, for example http://127.0.0.1:30000' % p['url'])
    if p['max_tokens'] < 1 or p['timeout'] <= 0:
        module.fail_json(msg='max_tokens must be 1 or more and timeout more than 0, got %s and %s' % (p['max_tokens'], p['timeout']))
    res = run_smoke(SmokeRequest(**p))
    out = res.to_json()
    out['msg'] = res.message()
    if res.ok:
        module.exit_json(changed=False, **out)
    module.fail_json(changed=False, **out)


if __name__ == '__main__':
    main()
