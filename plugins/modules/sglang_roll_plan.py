#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_roll_plan
short_description: Plan a rolling change of the SGLang workers behind a gateway, or refuse its input
version_added: 0.3.0
description:
  - The first step of the C(llmops.sglang.roll) playbook, on the controller, before anything is touched. Reads the
    workers from the inventory groups (as M(llmops.sglang.sglang_gateway_fleet)) and what the gateway holds now
    (O(gateway), the RV(llmops.sglang.sglang_gateway_workers#module:workers) of a query), and returns the batches - the
    canary (one worker, or one prefill/decode pair) first, then O(batch) workers at a time.
  - Reads each worker host's C(sglang_roll_preview), what the C(llmops.sglang.sglang_service) role's plan step
    (C(llmops.sglang.sglang_deploy) C(step=plan) and C(step=ranks)) registered before the roll. A worker whose deployment
    would not change (every rank) is in no batch - it stays in rotation, never drained - and is listed in RV(unchanged).
    A worker whose hosts registered nothing is rolled.
  - Refuses, naming what and what to try - a play with more than one gateway host (a roll goes through one gateway);
    a worker whose deploy plan refuses its input; a name in O(only) that is not a managed worker; a batch that would leave
    fewer than O(min_in_service) workers in rotation (never fewer than one; a batch that leaves no worker in service is
    always refused), counting the gateway's current rotation (workers it holds that no group names count and are left
    alone); prefill and decode workers that run different SGLang releases, or a change of their release in more than one
    batch (a prefill and a decode of different releases can pair and answer wrongly with status 200).
  - This plugin runs on the controller only.
options:
  groups:
    description: Inventory group names by worker type (C(regular), C(prefill), C(decode)), as for M(llmops.sglang.sglang_gateway_fleet).
    type: dict
    required: true
  gateway:
    description: The workers the gateway holds now (RV(llmops.sglang.sglang_gateway_workers#module:workers)).
    type: list
    elements: dict
    required: true
  batch:
    description: Workers per batch after the canary - a number (V(1), V(2)) or a percentage of the workers rolled (V(25%)).
    type: raw
    default: 1
  canary:
    description: Roll one worker (one prefill/decode pair) alone first; the roll stops when it fails.
    type: bool
    default: true
  min_in_service:
    description: Workers that must stay in the gateway's rotation while a batch is out (at least 1 in any case).
    type: int
    default: 1
  drain_timeout:
    description:
      - The roll's C(sglang_roll_drain_timeout), checked here (a number of seconds, 0 or more) so that a bad value is
        refused before any worker leaves rotation.
    type: float
    default: 120
  drain_policy:
    description: The roll's C(sglang_roll_drain_policy), checked here.
    type: str
    choices: [wait, proceed, fail]
    default: fail
  return_timeout:
    description: The roll's C(sglang_roll_return_timeout), checked here (a number of seconds, 0 or more).
    type: float
    default: 120
  only:
    description: Roll only these workers (inventory host names or worker URLs); every one must be a managed worker.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  idempotent:
    details: Plans only.
  platform:
    platforms: all
seealso:
  - module: llmops.sglang.sglang_gateway_fleet
  - module: llmops.sglang.sglang_gateway_workers
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Plan the roll
  llmops.sglang.sglang_roll_plan:
    groups: {regular: sglang}
    gateway: "{{ gateway_now.workers }}"
    batch: 25%
    min_in_service: 2
  register: roll_plan
'''

RETURN = r'''
batches:
  description: The batches in order - C(index), C(canary), C(names) (worker names), C(hosts) (every host of the batch),
    C(workers) (the worker entries).
  returned: always
  type: list
  elements: dict
fleet:
  description: Every worker the groups name.
  returned: always
  type: list
  elements: dict
in_rotation:
  description: Workers in the gateway's rotation before the roll.
  returned: always
  type: int
unmanaged:
  description: URLs the gateway holds that no group names (left alone, counted in service).
  returned: always
  type: list
  elements: str
warnings:
  description: What the plan noticed but accepts.
  returned: always
  type: list
  elements: str
unchanged:
  description: The workers (as in RV(fleet)) whose deploy plan says their deployment would not change - in no batch,
    left in rotation.
  returned: always
  type: list
  elements: dict
'''
