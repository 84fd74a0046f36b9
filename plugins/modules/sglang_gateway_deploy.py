#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_gateway_deploy
short_description: Run a step of the SGLang model gateway role; returns sglang_gateway_result
version_added: 0.3.0
description:
  - Install, configure or connect the gateway of P(llmops.sglang.sglang_gateway#role), one step per task. A step takes
    the role's variables (as its argument spec documents them) and the facts the steps before it recorded on this
    host, and gives back the role's result, registered by every task of the role as C(sglang_gateway_result).
  - The result (RV(status), RV(changed), RV(restarted), RV(started), RV(reasons), RV(release), RV(url), RV(workers),
    RV(added), RV(removed), RV(in_rotation), RV(smoke), RV(msg)) is the role's public interface; playbooks and users
    read it and nothing else the role does.
  - The decisions are pure functions of the inputs and the steps' observations (C(plugins/plugin_utils/_gateway_plan.py)) -
    a running gateway restarts only for a changed release, launcher, keys or unit; a gateway that is not running
    starts; a changed worker set is applied live through the control plane, never by a restart.
  - This plugin is internal to the role; call the role, not the plugin.
  - This plugin runs on the controller only.
options:
  step:
    description:
      - The step of the role to run on this host, in the role's order (C(tasks/main.yml)).
      - V(install) refuses an empty C(sglang_gateway_admin_key), reads the workers from the inventory, installs the
        release into its venv and refuses a release without the control-plane worker API
        (M(llmops.sglang.sglang_gateway_release)), before the unit, the keys or the workers are touched.
      - V(configure) writes the account, directories, launcher, workers file, keys and unit, then restarts a running
        gateway for what changed, or starts one that is not running.
      - V(workers) brings the gateway's workers to the inventory's (M(llmops.sglang.sglang_gateway_workers)), waits until
        every one is in rotation and sends one request through it (M(llmops.sglang.sglang_smoke)).
    type: str
    required: true
    choices: [install, configure, workers]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  check_mode:
    details:
      - In check mode nothing is written; the result says what a real run would do (RV(started) on a host whose gateway
        is not running - V(would start) in RV(msg); RV(restarted) with RV(reasons) on a serving host - V(would restart)).
      - The workers are compared with a serving gateway's in check mode too (RV(added), RV(removed)).
seealso:
  - module: llmops.sglang.sglang_gateway_workers
  - module: llmops.sglang.sglang_gateway_release
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
# The role runs this plugin; a play includes the role and reads sglang_gateway_result:
- name: Put the gateway in front of the SGLang servers
  ansible.builtin.include_role:
    name: llmops.sglang.sglang_gateway

- name: Stop when the gateway does not route to every worker
  ansible.builtin.assert:
    that: sglang_gateway_result.status == 'ready' or ansible_check_mode
    fail_msg: "{{ inventory_hostname }}: {{ sglang_gateway_result.msg }}"
'''

RETURN = r'''
status:
  description:
    - V(ready) (every worker in rotation, after the workers step), V(not checked) (the workers step did not run - check
      mode on a host whose gateway is not running, or a step before it) or V(failed) (see RV(failure)).
  returned: always
  type: str
  sample: ready
changed:
  description:
    - Whether the run restarted or started the gateway, or changed its workers. A step's own task reports its own
      modules' changes.
  returned: always
  type: bool
  sample: false
restarted:
  description: Whether the gateway was restarted (would be, in check mode), for RV(reasons).
  returned: always
  type: bool
  sample: false
started:
  description: Whether the gateway was started because it was not running (would be, in check mode).
  returned: always
  type: bool
  sample: false
reasons:
  description: What changed that restarted the running gateway, of V(release), V(launcher), V(keys), V(unit).
  returned: always
  type: list
  elements: str
  sample: [unit]
release:
  description: The gateway's distribution and version (the installed one's, once read).
  returned: always
  type: str
  sample: smg 1.13.0
url:
  description: Where the gateway answers on its host.
  returned: always
  type: str
  sample: http://127.0.0.1:30080
mode:
  description: The gateway's mode, V(regular) or V(pd) (prefill/decode disaggregation), from the inventory's groups.
  returned: always
  type: str
  sample: regular
workers:
  description: Every worker the gateway holds at the end (RV(llmops.sglang.sglang_gateway_workers#module:workers)).
  returned: always
  type: list
  elements: dict
  sample: [{url: "http://10.0.0.11:30000", worker_type: regular, status: ready, in_rotation: true}]
added:
  description: URLs registered (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: ["http://10.0.0.12:30000"]
removed:
  description: URLs taken out (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: []
in_rotation:
  description: How many workers the gateway may route to at the end.
  returned: always
  type: int
  sample: 2
smoke:
  description: The request through the gateway (M(llmops.sglang.sglang_smoke)'s result); empty when none was sent.
  returned: always
  type: dict
  sample: {ok: true, total: 0.41, tokens: 8}
check_mode:
  description: Whether this was a dry run.
  returned: always
  type: bool
  sample: false
msg:
  description: One line - the release, where it answers, the workers in rotation and what the run did.
  returned: always
  type: str
  sample: "smg 1.13.0 at http://127.0.0.1:30080, 2 worker(s) in rotation (restarted: unit changed)"
failure:
  description: The step that could not go on (C(step), C(what), C(msg)); V(null) when none.
  returned: always
  type: dict
  sample: {step: install, what: control-plane API, msg: "control-plane API (llmops.sglang.sglang_gateway_release) failed: ..."}
facts:
  description: What the steps observed so far, carried to the next step (internal; its fields may change).
  returned: always
  type: dict
step:
  description: The step that ran.
  returned: always
  type: str
  sample: workers
'''
