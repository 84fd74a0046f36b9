#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_deploy
short_description: One step of the sglang_service role's deployment, returning the role's one public result
version_added: 0.2.0
description:
  - The steps of the P(llmops.sglang.sglang_service#role) role. Each step reads the role's inputs (its variables, as
    documented in the role's argument spec) and what the earlier steps of this run observed on this host and on the
    other ranks of its multi-node deployment, and returns the role's result, which the role registers as
    C(sglang_service_result).
  - The result (RV(outcome), RV(status), RV(changed), RV(restarted), RV(reasons), RV(stage), RV(signature),
    RV(smoke), RV(startup), RV(gate), ...) is the role's public interface; the run report (M(llmops.sglang.sglang_run_report)),
    the tune playbook and users read it and nothing else the role does.
  - This plugin is internal to the role; call the role, not the plugin.
  - This plugin runs on the controller only.
options:
  step:
    description:
      - The step of the role to run on this host, in the role's order (C(tasks/plan.yml), C(tasks/deploy.yml)).
      - V(plan) refuses bad input before anything is touched and runs the no-change check; V(ranks) compares it with the
        other ranks of a multi-node deployment; V(preflight), V(install), V(configure), V(restart), V(verify),
        V(rollback) and V(finish) are the full deploy's steps (V(finish) runs after a failure too).
      - V(rollback) takes rank 0's benchmark verdict on the other ranks first (the verify step is the ranks' barrier
        before it).
    type: str
    required: true
    choices: [plan, ranks, install, configure, restart, verify, rollback, finish, preflight]
  preview:
    description:
      - The plan steps asked before a change that comes later in the same run (the C(llmops.sglang.roll) playbook asks each
        worker before it takes any worker out of rotation). A host's line then says V(would deploy) instead of
        V(full deploy); the steps do the same with or without it.
    type: bool
    default: false
    version_added: 0.3.0
  deploy:
    description:
      - With O(step=plan) on a single host (no ranks of a multi-node deployment on other hosts) that its plan does not
        leave unchanged, the task goes on with the whole deploy - V(install), V(configure), V(restart), V(verify),
        V(rollback), then V(finish) (after a failure too) - and returns the result those steps leave (its C(step) is
        V(finish)). The role's C(tasks/main.yml) sets it; the ranks of a multi-node deployment run each step as a task
        of its own (a barrier between the ranks). Ignored with O(preview).
    type: bool
    default: false
    version_added: 0.3.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  check_mode:
    details: In check mode the result says what a real run would do (RV(outcome) V(would deploy) or V(would restart)).
seealso:
  - module: llmops.sglang.sglang_run_report
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
# Inside the role only; a playbook includes the role and reads its result:
- name: Deploy SGLang
  ansible.builtin.include_role:
    name: llmops.sglang.sglang_service

- name: Say what the run did
  ansible.builtin.debug:
    msg: "{{ sglang_service_result.outcome }}: {{ sglang_service_result.msg }}"
'''

RETURN = r'''
server:
  description: The server (C(sglang_service_name)).
  returned: always
  type: str
  sample: sglang
outcome:
  description:
    - What the run did to the server - V(unchanged) (the host still ran exactly the last proven deployment; nothing was
      installed, written or restarted), V(started) (it was not running), V(restarted), V(rolled back) (the new
      configuration failed its start, its smoke request or the benchmark gate, and the previous one was restored and
      started again), V(would deploy) or V(would restart) (check mode), V(not started) (the run stopped before the
      start, or changed nothing that needs a restart).
    - The run report's C(RUN) column.
  returned: always
  type: str
  sample: restarted
status:
  description:
    - How the server ended - V(ready); a failed start's status (V(crashed), V(stalled), V(timeout), V(error),
      V(unreachable), V(rebooted)); V(failed) (a step before the start, or the smoke request); V(regressed) (the benchmark
      gate found a regression); V(dry run) (check mode); V(not run) (no readiness wait, C(sglang_service_wait=false)).
  returned: always
  type: str
  sample: ready
changed:
  description: Whether this run changed the host (the PLAY RECAP counts a change on the host exactly then).
  returned: always
  type: bool
  sample: true
restarted:
  description: Whether this run started or restarted the server.
  returned: always
  type: bool
  sample: true
check_mode:
  description: Whether this was a dry run (C(--check)).
  returned: always
  type: bool
  sample: false
msg:
  description: One line that says what happened (the run report's C(REASON)).
  returned: always
  type: str
  sample: serving glm-5
reasons:
  description: Why the host was deployed in full (what differed from the last proven deployment); empty when unchanged.
  returned: always
  type: list
  elements: str
  sample: ["inputs changed: sglang_service_args"]
restart_reasons:
  description: Why the server was (or in check mode would be) restarted.
  returned: always
  type: list
  elements: str
  sample: ["unit file"]
stage:
  description: The SGLang startup stage the start reached (V(ready) when serving).
  returned: always
  type: str
  sample: ready
signature:
  description: The crash signature of a failed start (see C(docs/log-classification.md)), else V(null).
  returned: always
  type: str
  sample: cuda_oom
elapsed:
  description: Seconds the readiness wait took in this run; V(null) when nothing was waited for.
  returned: always
  type: float
  sample: 12.4
url:
  description: Where node rank 0 serves, as the role probes it (loopback for a wildcard listen address).
  returned: always
  type: str
  sample: http://127.0.0.1:30000
node_rank:
  description: This host's node rank (0 for a single-host server).
  returned: always
  type: int
  sample: 0
deployment:
  description: The inventory group of a multi-node deployment, else V(null).
  returned: always
  type: str
  sample: glm5
sglang_version:
  description: The SGLang version the no-change check found on the host.
  returned: always
  type: str
  sample: 0.5.9
recorded_at:
  description: When the deployment record the no-change check compared with was written.
  returned: always
  type: str
  sample: "2026-12-01T13:02:11Z"
drain:
  description:
    - With C(sglang_service_drain), the drain the run waited for before it changed what the server runs
      (M(llmops.sglang.sglang_drain) - C(outcome), C(seconds), C(in_flight_at_start), C(drained), C(still_running),
      C(peak), C(policy), C(at_timeout), C(source), C(reason), C(msg)) and C(waited), the seconds the run waited for it;
      V(null) without it, on a rank above 0, or when the run stopped before it.
  returned: always
  type: dict
preflight:
  description:
    - The pre-flight's verdict (M(llmops.sglang.sglang_preflight) - C(ok), C(msg), C(summary), C(rank), C(stopped),
      C(removed), C(failed_checks), C(checks)), V(null) when none ran (the no-change path).
    - A passed pre-flight's one line is printed with C(-v) only.
  returned: always
  type: dict
  sample: {ok: true, summary: "gpus ok (no other holder), ports ok (30000 free), shm ok (clean)"}
sm120_patch:
  description:
    - The SM120 patch state this run left (C(state) V(present) or V(absent), C(sglang_version), C(sites) - each with
      C(name) and C(status) as M(llmops.sglang.sglang_patch_sm120) returns them; after a rollback, the restored state),
      V(null) when the patch was not run (C(sglang_service_sm120_patch) unset, or the no-change path).
    - Its one line is printed with C(-v) only.
  returned: always
  type: dict
  sample: {state: present, sglang_version: 0.5.9, sites: [{name: allreduce_fusion_gate, status: applied}]}
smoke:
  description: The smoke request's result (M(llmops.sglang.sglang_smoke)), V(null) when none was sent.
  returned: always
  type: dict
  sample: {ok: true, ttft: 0.104, tokens: 8, total: 0.82, model: glm-5}
startup:
  description: The start as recorded in the host's startup history (C(record), C(comparison)), V(null) when none was recorded.
  returned: always
  type: dict
gate:
  description:
    - The benchmark gate's verdict after a change (C(change), C(status) V(first), V(accepted), V(regressed) or
      V(not measured), C(headline), C(summary), C(result), C(verdict), C(rolled_back), C(after_rollback)); V(null)
      without C(sglang_service_benchmark) or when nothing changed.
  returned: always
  type: dict
benchmark:
  description: Rank 0's last M(llmops.sglang.sglang_benchmark) result in this run, V(null) when none ran.
  returned: always
  type: dict
wait:
  description: The readiness wait's whole result (M(llmops.sglang.wait_for_sglang), with the log tail and error context).
  returned: always
  type: dict
rollback:
  description: What the rollback did (C(msg), C(status) of the failed start, C(after)), V(null) without a rollback.
  returned: always
  type: dict
failure:
  description: The step that failed before the start (C(step), C(msg)), V(null) when none did.
  returned: always
  type: dict
deployed_over:
  description:
    - Set when this run waited for another run's host lock and that run recorded a deployment meanwhile, which this
      run then replaced, for example V(deployed over a configuration from awx@ctl-2 11 s earlier) (the play named after the controller);
      V(null) otherwise. The other run's table said ready for a configuration that no longer runs.
  returned: always
  type: str
  version_added: 0.3.0
'''
