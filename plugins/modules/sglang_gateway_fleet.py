#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_gateway_fleet
short_description: The SGLang workers behind a gateway, read from the inventory
version_added: 0.3.0
description:
  - Reads the workers of the SGLang model gateway from inventory groups, on the controller. Each host of a group is one
    worker, at C(http://<address>:<port>) - the address is C(sglang_gateway_worker_host), else C(ansible_host), else the
    host name; the port is the C(port) of C(sglang_service_args), else C(sglang_service_port), else 30000;
    C(sglang_gateway_worker_url) overrides both.
  - The hosts of one multi-node deployment (C(sglang_service_deployment_group)) are one worker, reached at its node rank 0
    (C(sglang_service_node_rank=0), else the group's first host).
  - A prefill worker's bootstrap port is C(sglang_gateway_bootstrap_port), else its C(disaggregation-bootstrap-port) server
    argument.
  - Fails naming the group when a group named does not exist, when a host is in two worker groups, or when two workers
    would have one URL.
  - This plugin runs on the controller only.
options:
  groups:
    description:
      - Inventory group names by worker type - C(regular) (a gateway without prefill/decode disaggregation), C(prefill),
        C(decode). An empty name is skipped.
    type: dict
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  idempotent:
    details: Reads the inventory only.
  platform:
    platforms: all
seealso:
  - module: llmops.sglang.sglang_gateway_workers
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: The workers of the group sglang
  llmops.sglang.sglang_gateway_fleet:
    groups:
      regular: sglang
  register: fleet

- name: A prefill/decode fleet
  llmops.sglang.sglang_gateway_fleet:
    groups:
      prefill: sglang_prefill
      decode: sglang_decode
'''

RETURN = r'''
workers:
  description: One entry per worker - C(name) (its node rank 0 host), C(url), C(hosts), C(worker_type), C(bootstrap_port),
    C(deployment_group), C(version) (C(sglang_service_version)).
  returned: always
  type: list
  elements: dict
api_workers:
  description: The same as the O(llmops.sglang.sglang_gateway_workers#module:workers) option wants them.
  returned: always
  type: list
  elements: dict
hosts:
  description: Every host the workers run on.
  returned: always
  type: list
  elements: str
urls:
  description: The workers' URLs.
  returned: always
  type: list
  elements: str
mode:
  description:
    - The gateway's mode for these workers, V(pd) (C(--pd-disaggregation)) with any prefill or decode worker, else
      V(regular). The gateway reads it at its start only, so the P(llmops.sglang.sglang_gateway#role) role restarts a
      gateway whose mode changes.
  returned: always
  type: str
  sample: regular
  version_added: 0.3.0
'''
