#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_roll_step
short_description: The decisions of a rolling change - who goes back into rotation, whether the roll goes on, the table
version_added: 0.3.0
description:
  - Used by the C(llmops.sglang.roll) playbook (C(playbooks/tasks/roll_batch.yml)) on the gateway's host; its decisions
    are pure functions (C(plugins/module_utils/gateway/_roll.py)) made on the controller.
  - O(phase=out) - takes the batch out of the gateway's rotation, confirms it and drains its servers
    (M(llmops.sglang.sglang_gateway_rotation) O(llmops.sglang.sglang_gateway_rotation#module:state=out), run on the
    task's host), or reads that removal from O(previous) when the previous batch's return step made it; returns what the
    removal returned and RV(cleared_hosts), the hosts whose change may run. A refusal, a failed drain or an unreachable
    gateway host is returned (no drains, no cleared hosts), not raised; the batch's O(phase=return) then stops the roll.
  - O(phase=return) - after a batch's change, reads what each host of O(batch) registered (the
    C(llmops.sglang.sglang_service) role's public result C(sglang_service_result), the failure the roll caught in
    C(sglang_roll_failure)) and O(out) (the batch's removal and drains, M(llmops.sglang.sglang_gateway_rotation)),
    decides whose servers serve (a failed drain left its server untouched; a rolled-back change serves when the previous
    configuration is ready; a failed change does not), puts those back and proves each
    (M(llmops.sglang.sglang_gateway_rotation) O(llmops.sglang.sglang_gateway_rotation#module:state=in), run on the task's
    host), says whether the roll goes on (it stops on a failed drain, a failed or rolled-back change, a worker that did
    not return), takes a worker that did not return out of rotation again, prints one line per worker, and keeps the
    rows so far in the fact C(sglang_roll_state). When the roll goes on and O(next_batch) names the next batch, takes that
    batch out of rotation and drains it in the same task (M(llmops.sglang.sglang_gateway_rotation)
    O(llmops.sglang.sglang_gateway_rotation#module:state=out), the same call the next batch would begin with; in the
    call that puts this batch back, with O(llmops.sglang.sglang_gateway_rotation#module:then_out)), and returns what it
    did as RV(next_out). One task per batch for all of it.
  - O(phase=report) - prints the roll's table, one row per worker of O(plan) in the inventory's order (a worker the roll
    did not reach is C(untouched), a worker the plan left alone because its deployment would not change C(unchanged)),
    and returns the rows (written as JSON to O(path) too).
options:
  phase:
    description: Which step.
    type: str
    required: true
    choices: [out, return, report]
  batch:
    description: With O(phase=out) and O(phase=return), the batch (an entry of RV(llmops.sglang.sglang_roll_plan#module:batches)).
    type: dict
  previous:
    description:
      - With O(phase=out), the registered result of the previous batch's O(phase=return) (empty for the first batch).
        When its RV(next_out) is this batch, the batch is already out of rotation and drained, and is not taken out again.
    type: dict
    default: {}
  out:
    description: With O(phase=return), the registered result of the batch's O(phase=out).
    type: dict
    default: {}
  gateway:
    description: With O(phase=out) and O(phase=return), the gateway of the roll. Empty values count as unset.
    type: dict
    default: {}
    suboptions:
      url:
        description: Its base URL, as seen from the task's host (required with O(phase=out) and O(phase=return)).
        type: str
      admin_key:
        description: An admin key of its C(--control-plane-api-keys).
        type: str
      api_key:
        description: Its C(--api-key) (the proof's requests, the workers' registration).
        type: str
      timeout:
        description: Seconds the gateway may take to report the workers in rotation.
        type: float
        default: 120
  rotation:
    description: How a batch leaves rotation, with O(phase=out) and for the next batch with O(phase=return).
    type: dict
    default: {}
    suboptions:
      min_in_service:
        description: As O(llmops.sglang.sglang_gateway_rotation#module:min_in_service).
        type: int
        default: 0
      drain:
        description:
          - As O(llmops.sglang.sglang_gateway_rotation#module:drain). V(false) (what llmops.sglang.roll passes) - the
            batch's change drains each server itself (the role's C(sglang_service_drain)); the worker's row then shows
            that drain, and its change's time leaves out what the change waited for it.
        type: bool
        default: true
      drain_timeout:
        description: As O(llmops.sglang.sglang_gateway_rotation#module:drain_timeout).
        type: float
        default: 120
      drain_policy:
        description: As O(llmops.sglang.sglang_gateway_rotation#module:drain_policy).
        type: str
        choices: [wait, proceed, fail]
        default: fail
  rows:
    description: With O(phase=return), the rows of earlier batches; with O(phase=report), every row.
    type: list
    elements: dict
    default: []
  next_batch:
    description:
      - With O(phase=return), the batch after this one (an entry of RV(llmops.sglang.sglang_roll_plan#module:batches)),
        taken out of rotation and drained as O(rotation) says once this batch is back and proven and the roll goes on.
        Empty (the last batch) takes nothing out.
    type: dict
    default: {}
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
    support: partial
    details:
      - O(phase=out) and O(phase=return) are skipped (they change the gateway's rotation); O(phase=report) prints a dry
        run's table, the workers of the plan's batches as C(would roll).
  idempotent:
    details: Workers already in rotation are left there; a second call proves them again.
  platform:
    platforms: posix
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
rows:
  description:
    - The batch's rows (O(phase=return)) or every row (O(phase=report)), one per worker - C(name), C(url), C(batch),
      C(drain), C(drained), C(drain_seconds), C(still_running), C(change), C(change_detail), C(change_seconds), C(start),
      C(start_seconds), C(serves), C(returned), C(return_seconds), C(status), C(reason).
  returned: always
  type: list
  elements: dict
stop:
  description: With O(phase=return), whether the roll stops after this batch.
  returned: phase=return
  type: bool
reason:
  description: Why the roll goes on or stops.
  returned: always
  type: str
dry_run:
  description: With O(phase=report), whether the run was in check mode (the table then says so).
  returned: phase=report
  type: bool
take_out:
  description: With O(phase=return), URLs of workers taken out of rotation again (back, but not proven).
  returned: phase=return
  type: list
  elements: str
back:
  description: With O(phase=return), the result of putting the workers back (as M(llmops.sglang.sglang_gateway_rotation) returns it).
  returned: phase=return
  type: dict
cleared_hosts:
  description:
    - With O(phase=out), the hosts of the batch whose change may run - their worker left rotation and drained, or
      reached O(rotation.drain_timeout) under the policy C(proceed), or left rotation with its drain left to the change
      (O(rotation.drain=false)). Beside it, what
      M(llmops.sglang.sglang_gateway_rotation) returned for the removal (RV(llmops.sglang.sglang_gateway_rotation#module:drains),
      C(removed), C(at), C(msg)).
  returned: phase=out
  type: list
  elements: str
change_drains:
  description:
    - With O(phase=out), host -> the C(sglang_service_drain) its change runs with (C(url), the server the gateway routed
      to; C(timeout), C(policy) from O(rotation); C(interval), C(idle_spacing)), for each worker whose removal left its
      drain to the change; on the worker's serving host (rank 0) only.
  returned: phase=out
  type: dict
reused:
  description: With O(phase=out), whether the removal was the previous batch's return step's (RV(next_out)).
  returned: phase=out
  type: bool
next_out:
  description:
    - With O(phase=return), when the roll goes on and O(next_batch) named a batch - C(index) (the batch's) and C(result) (what
      M(llmops.sglang.sglang_gateway_rotation) returned for taking it out, as with
      O(llmops.sglang.sglang_gateway_rotation#module:state=out) - RV(llmops.sglang.sglang_gateway_rotation#module:drains),
      C(msg), ...; a refusal or a failed drain is in it, not raised).
  returned: when the next batch was taken out
  type: dict
'''
