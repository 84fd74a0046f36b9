#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_roll_step
short_description: The controller's decisions of a rolling change - who goes back into rotation, whether the roll goes on, the table
version_added: 0.3.0
description:
  - Used by the C(llmops.sglang.roll) playbook (C(playbooks/tasks/roll_batch.yml)) on the gateway's host, with no module run
    on any host; its decisions are pure functions (C(plugins/module_utils/gateway/_roll.py)).
  - O(phase=return) - after a batch's change, reads what each host of O(batch) registered (the
    C(llmops.sglang.sglang_service) role's public result C(sglang_service_result), the failure the roll caught in
    C(sglang_roll_failure)) and O(out) (the batch's removal and drains, M(llmops.sglang.sglang_gateway_rotation)), and returns each worker's
    outcome and the workers whose servers serve and go back into rotation (a failed drain left its server untouched; a
    rolled-back change serves when the previous configuration is ready; a failed change does not).
  - O(phase=judge) - after they were put back (O(back)), marks each worker returned or not, says whether the roll goes on
    (it stops on a failed drain, a failed or rolled-back change, a worker that did not return), which workers to take out
    of rotation again, prints one line per worker, and keeps the rows so far in the fact C(sglang_roll_state).
  - O(phase=report) - prints the roll's table, one row per worker of O(plan) (a worker the roll did not reach is
    C(untouched)), and returns the rows (written as JSON to O(path) too).
  - This plugin runs on the controller only.
options:
  phase:
    description: Which decision.
    type: str
    required: true
    choices: [return, judge, report]
  batch:
    description: With O(phase=return), the batch (an entry of RV(llmops.sglang.sglang_roll_plan#module:batches)).
    type: dict
  out:
    description: With O(phase=return), the registered result of the batch's O(llmops.sglang.sglang_gateway_rotation#module:state=out).
    type: dict
    default: {}
  outcomes:
    description: With O(phase=judge), the RV(outcomes) of O(phase=return).
    type: list
    elements: dict
    default: []
  back:
    description: With O(phase=judge), the registered result of O(llmops.sglang.sglang_gateway_rotation#module:state=in).
    type: dict
    default: {}
  rows:
    description: With O(phase=judge), the rows of earlier batches; with O(phase=report), every row.
    type: list
    elements: dict
    default: []
  plan:
    description: With O(phase=report), the registered result of M(llmops.sglang.sglang_roll_plan).
    type: dict
  stopped:
    description: With O(phase=report), why the roll stopped (empty when it did not).
    type: str
    default: ""
  path:
    description: With O(phase=report), also write the rows as a JSON list to this file on the controller.
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Decides and prints; changes nothing.
  platform:
    platforms: all
seealso:
  - module: llmops.sglang.sglang_roll_plan
  - module: llmops.sglang.sglang_gateway_rotation
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: One row per worker
  llmops.sglang.sglang_roll_step:
    phase: report
    plan: "{{ sglang_roll_plan }}"
    rows: "{{ ansible_facts.sglang_roll_state.rows | default([]) }}"
'''

RETURN = r'''
outcomes:
  description: With O(phase=return), one per worker - C(name), C(url), C(batch), C(drain), C(drained), C(drain_seconds),
    C(still_running), C(change), C(change_detail), C(change_seconds), C(start), C(start_seconds), C(serves), C(returned),
    C(return_seconds), C(status), C(reason).
  returned: phase=return
  type: list
  elements: dict
workers:
  description: With O(phase=return), the workers that go back into rotation (C(url), C(worker_type), C(bootstrap_port)).
  returned: phase=return
  type: list
  elements: dict
urls:
  description: With O(phase=return), their URLs.
  returned: phase=return
  type: list
  elements: str
rows:
  description: The batch's rows (O(phase=judge)) or every row (O(phase=report)), as RV(outcomes).
  returned: phase=judge or phase=report
  type: list
  elements: dict
stop:
  description: With O(phase=judge), whether the roll stops after this batch.
  returned: phase=judge
  type: bool
reason:
  description: Why the roll goes on or stops.
  returned: phase=judge or phase=report
  type: str
take_out:
  description: With O(phase=judge), URLs of workers to take out of rotation again (back, but not proven).
  returned: phase=judge
  type: list
  elements: str
'''
