#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_run_report
short_description: End a deploy or check run with one table, one row per host, and return the rows as data
version_added: 0.2.0
description:
  - Builds one row per host from what the run registered (for a deploy, the one result of the
    P(llmops.sglang.sglang_service#role) role, C(sglang_service_result), and a task failure caught by the playbook) and
    prints them as one table, once, on the controller. The detail (tracebacks, log tails) stays in each host's results.
  - Columns - C(HOST), C(STATUS) (V(ready), V(crashed), V(stalled), V(timeout), V(error), V(failed), V(regressed),
    V(dry run), V(unreachable), V(not run)), C(RUN) (deploy only, what the run did - V(unchanged), V(started),
    V(restarted), V(rolled back), V(would deploy), V(would restart), V(not started)), C(STAGE) (the SGLang startup stage
    reached, or V(before start)), C(TIME) (seconds of this run's wait for the start, wall clock), C(SIGNATURE) (the crash
    signature), C(REASON) (one line). A deploy in check mode says on the line above the table that it was a dry run.
  - The same rows are returned in RV(rows); O(query) selects from them with a JMESPath expression.
  - Used by the C(llmops.sglang.deploy) and C(llmops.sglang.check) playbooks as their last task
    (with C(run_once)); see C(docs/run_report.md) for the example queries and how other parts add columns.
  - This plugin runs on the controller only.
options:
  kind:
    description:
      - Which run the rows describe. V(deploy) reads the roles' results C(sglang_service_result) and C(nvidia_driver_result)
        and C(sglang_run_failure); V(check) reads C(check_ready), C(check_driver), C(check_preflight), C(check_patch),
        C(check_smoke), C(check_starts) and C(sglang_run_failure) of every host.
    type: str
    required: true
    choices: [check, deploy]
  hosts:
    description:
      - The hosts to report, in this order. Defaults to every host of the play (C(ansible_play_hosts_all)).
      - A host that is not among the play's active hosts (C(ansible_play_hosts)) is reported as V(unreachable).
    type: list
    elements: str
  query:
    description:
      - A JMESPath expression evaluated over RV(rows) (a list of dicts); its result is printed under the table and
        returned in RV(selected). Needs the C(jmespath) Python library on the controller.
      - "For example V([?status=='crashed'].{host: host, signature: signature}), V([?changed].host),
        V(max_by([?seconds != null], &seconds\\).host)."
    type: str
  path:
    description:
      - Also write RV(rows) as a JSON list to this file on the controller (replaced atomically), for tools that read the
        run's outcome afterwards (C(jq), C(jp), CI pipelines).
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  check_mode:
    details: Reads registered results only; the same in check mode.
  idempotent:
    details: Never changes anything.
  platform:
    platforms: all
notes:
  - With C(serial) batches the table is printed once, after the last batch or after a batch in which a host failed
    (the play stops there); every batch returns its rows.
seealso:
  - module: llmops.sglang.wait_for_sglang
  - module: llmops.sglang.sglang_deploy_stamp
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Report every host of the deploy and list the crashed ones with their signature
  llmops.sglang.sglang_run_report:
    kind: deploy
    query: "[?status=='crashed'].{host: host, signature: signature}"
  run_once: true
  register: report

- name: Fail the hosts whose row is not ready
  ansible.builtin.fail:
    msg: "{{ inventory_hostname }}: see the table above"
  when: inventory_hostname in report.failed_hosts
'''

RETURN = r'''
rows:
  description:
    - One dict per host, in the order of O(hosts). Keys - C(host), C(status), C(ok) (V(true) when ready), C(stage),
      C(seconds) (null when no start was waited for), C(signature) (null unless crashed), C(changed) (the run changed
      and so restarted the server), C(reason) (one line), plus any column added by another part of the run.
  returned: always
  type: list
  elements: dict
  sample:
    - {host: node1, status: crashed, ok: false, stage: cuda_graph, seconds: 5.3, signature: cuda_oom, changed: true,
       reason: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."}
    - {host: node2, status: ready, ok: true, stage: ready, seconds: null, signature: null, changed: false,
       reason: "unchanged since 2026-12-01T13:02:11Z (SGLang 0.5.9, GET /health 200)"}
failed_hosts:
  description: Hosts whose row is not ready (hosts not run in this batch are left out).
  returned: always
  type: list
  elements: str
  sample: [node1]
printed:
  description: Whether this task printed the table (false for a serial batch that is neither the last nor failed).
  returned: always
  type: bool
  sample: true
path:
  description: The file RV(rows) were written to.
  returned: when O(path) is set
  type: str
  sample: /var/tmp/sglang-deploy-report.json
selected:
  description: The result of O(query) over RV(rows).
  returned: when O(query) is set
  type: raw
  sample: [{host: node1, signature: cuda_oom}]
'''
