#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_preflight
short_description: Find what would make an SGLang (re)start fail or hang, and clean up what is the server's own
version_added: 0.2.0
description:
  - Checks a host before an SGLang server starts or restarts and reports each check with what it found. Read-only
    unless O(cleanup=true).
  - B(gpus) - every process that holds one of the server's GPU device nodes (C(/dev/nvidia<N>) of
    C(CUDA_VISIBLE_DEVICES) in O(environment), else every GPU) or the shared nodes (C(/dev/nvidiactl),
    C(/dev/nvidia-uvm)), read from C(/proc/<pid>/fd) and C(/proc/<pid>/maps), plus nvidia-smi's compute apps with their
    memory where nvidia-smi works. Each holder has its pid, user, command line, systemd unit (from its cgroup) and GPUs,
    and a class. V(own) is the unit's current run. V(orphan) is left by an earlier run of this server. That is an
    SGLang process (C(sglang::scheduler_TP0), C(sglang::detokenizer), C(python -m sglang.launch_server)) or a child of
    one. It runs as the service user, is re-parented to PID 1 or a systemd manager, and is outside every other
    service's cgroup. A process left in the unit's own cgroup while the unit is inactive is an orphan too.
    V(foreign) is everything else.
    A foreign process on one of the server's GPUs fails the check and is named. Orphans fail it unless O(cleanup=true)
    stops them.
  - B(ports) - the ports the server binds (C(--port), C(--nccl-port), the C(--dist-init-addr) port on rank 0, the
    disaggregation bootstrap port of a prefill server) are free or held by the unit itself; otherwise the holder is named.
  - B(driver) - the loaded NVIDIA kernel module matches user space (the evidence of M(llmops.sglang.nvidia_driver_match)),
    and the CUDA version the driver supports (nvidia-smi's header, else NVIDIA's driver table) is at least the CUDA
    version the installed C(torch) was built for. That version is read from installed distribution metadata (the
    C(+cuXYZ) local version, or the C(nvidia-cuda-runtime) wheel C(torch) pins). C(torch) is never imported.
  - B(shm) - POSIX semaphores and shared memory segments in O(shm_dir) owned by the service user that no process holds
    (left by an unclean kill of an earlier run). O(cleanup=true) removes them.
  - B(disk) - free space where the model and the caches live, a local model path that exists, and a hub model id that
    is in the Hugging Face cache when the server runs offline (C(HF_HUB_OFFLINE)).
  - B(gpu_health) - the health of the server's GPUs (C(CUDA_VISIBLE_DEVICES) of O(environment), else the O(gpu_devices)
    nodes, else the C(tp x pp x dp) GPUs from C(--base-gpu-id) of O(server_args)). Each must be listed by
    C(nvidia-smi -q). None may have an Xid since boot that NVIDIA's Xid catalog says needs a GPU reset or a reboot
    (read from the kernel log, O(kernel_log)), uncorrectable ECC errors since the driver loaded, pages pending retirement,
    a pending or failed row remapping, or a reset the driver asks for. Where DCGM is installed, C(dcgmi diag -r 1) must
    pass on them. A problem names the GPU, its PCI address, the Xid and NVIDIA's meaning of it. O(gpu_health=warn)
    reports the problems as warnings instead. A host without C(nvidia-smi) and without a kernel log reports V(unknown).
  - It also returns RV(rank), the facts on which the ranks of a multi-node deployment must agree. Compare them on the
    controller with the P(llmops.sglang.rank_differences#filter) filter.
  - Never stops a process that is not this server's own, and never removes a file of another user.
options:
  unit:
    description: The server's systemd unit. Its cgroup tells its own processes apart; its C(User=) is the default O(user).
    type: str
    default: sglang.service
  user:
    description:
      - The service user. Only processes and files of this user can be the server's orphans or leaked shared memory.
      - Defaults to the unit's C(User=). When neither is known, no process counts as an orphan (all are foreign).
    type: str
  server_args:
    description:
      - The server's arguments, flag name to value (the form of P(llmops.sglang.sglang_service#role)'s
        C(sglang_service_args)), for its ports and its model.
    type: dict
    default: {}
  environment:
    description:
      - The server's environment (C(CUDA_VISIBLE_DEVICES), C(HF_HOME), C(HF_HUB_CACHE), C(HF_HUB_OFFLINE), C(HOME)).
    type: dict
    default: {}
  python:
    description:
      - The interpreter of the environment SGLang runs in. The versions of SGLang and C(torch), and the CUDA runtime
        wheel, are read from its installed distributions. Without it, or when it does not exist yet, the driver check
        compares nothing.
    type: path
  working_directory:
    description: The server's working directory, for a relative model path and the free-space check.
    type: path
    default: /
  gpu_devices:
    description:
      - The server's GPU device nodes. The default is the C(/dev/nvidia<N>) nodes that C(CUDA_VISIBLE_DEVICES) leaves.
      - Set it on hosts with other device paths. The collection's tests point it at files that stand in for GPUs.
    type: list
    elements: path
    default: []
  shared_devices:
    description: Device nodes every CUDA process opens whatever GPU it uses; their holders are reported, not failed.
    type: list
    elements: path
    default: [/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools]
  shm_dir:
    description: Where POSIX shared memory and semaphores live.
    type: path
    default: /dev/shm
  cleanup:
    description:
      - Stop the server's orphans (SIGTERM, up to O(stop_timeout) seconds, then SIGKILL) and remove its leaked shared
        memory. Reports what was stopped and removed. Foreign processes are never touched.
    type: bool
    default: false
  stop_timeout:
    description: Seconds an orphan gets to exit after SIGTERM before it gets SIGKILL.
    type: float
    default: 10
  min_free_gb:
    description:
      - Free space (GB) wanted on the file systems of the model, the hub cache and the working directory. The default
        catches a full disk (JIT caches, logs and shared files cannot be written); raise it to the model's size when
        the server downloads the model at its start.
    type: float
    default: 2
  checks:
    description: The checks to run.
    type: list
    elements: str
    choices: [gpus, ports, driver, shm, disk, gpu_health]
    default: [gpus, ports, driver, shm, disk, gpu_health]
  gpu_health:
    description:
      - What a GPU health problem does - V(fail) fails the check (nothing is started), V(warn) reports it as a warning.
    type: str
    choices: [fail, warn]
    default: fail
  kernel_log:
    description:
      - A kernel log file to read Xid lines from (its part after the last boot banner), for example C(/var/log/kern.log).
      - The default reads C(journalctl -k -b 0), else C(dmesg).
    type: path
  nvidia_smi:
    description: The C(nvidia-smi) to run for the GPU health check. The default is the one on C(PATH).
    type: path
  dcgm_diag:
    description: Run C(dcgmi diag -r 1) (a few seconds) where NVIDIA DCGM is installed.
    type: bool
    default: true
  unit_stopped:
    description:
      - Set right after stopping the unit for a restart. A process of the unit that still holds a GPU is then a
        leftover and fails the check.
    type: bool
    default: false
  fail_on_problems:
    description:
      - Fail the task when a check fails. With V(false) the result only reports it (RV(ok)), for read-only reports.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: Reports what O(cleanup=true) would stop and remove (status V(would clean), RV(ignore:changed=true)) and touches nothing.
  diff_mode:
    support: full
    details: Lists the processes and files a cleanup stops and removes.
notes:
  - Needs root (C(become=true)) to see the file descriptors of other users' processes.
  - C(CUDA_VISIBLE_DEVICES) indices are taken as device numbers (the PCI bus order of nvidia-smi and C(/dev/nvidia<N>)).
    GPU UUIDs are resolved with nvidia-smi.
  - A host without an NVIDIA driver or without C(torch) reports the driver check as V(unknown); that does not fail it.
seealso:
  - module: llmops.sglang.nvidia_driver_match
  - module: llmops.sglang.wait_for_sglang
  - plugin: llmops.sglang.rank_differences
    plugin_type: filter
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Check the host before (re)starting SGLang, stopping the server's own orphans
  llmops.sglang.sglang_preflight:
    unit: sglang.service
    user: sglang
    python: /opt/sglang/venv/bin/python
    server_args:
      model-path: zai-org/GLM-5-FP8
      port: 30000
      tp-size: 8
    environment:
      CUDA_VISIBLE_DEVICES: "0,1,2,3,4,5,6,7"
      HOME: /var/lib/sglang
    cleanup: true
  register: preflight

- name: Report the pre-flight in one line
  ansible.builtin.debug:
    msg: "{{ preflight.summary }}"

- name: Read-only report that never fails the task
  llmops.sglang.sglang_preflight:
    unit: sglang.service
    fail_on_problems: false
  check_mode: true
  register: preflight_report
'''

RETURN = r'''
msg:
  description:
    - What failed, why the start would fail and what to do, one problem after the other; or that the pre-flight passed.
  returned: always
  type: str
  sample: >-
    pre-flight for sglang.service failed (gpus), nothing was started: gpus: GPU 0 is held by pid 13118 python3 (user
    alice, unit session-4.scope, 76800 MiB): runs as alice, not as the service user. SGLang would run out of memory on
    it. Stop that process or give the server other GPUs (CUDA_VISIBLE_DEVICES); the pre-flight never stops a process
    that is not this server's own.
ok:
  description: Whether no check failed.
  returned: always
  type: bool
  sample: true
summary:
  description: One line with every check's status and what it found.
  returned: always
  type: str
  sample: >-
    gpus ok (8 GPUs, no other holder), ports ok (30000 free), driver ok (driver 570.133.20 supports CUDA 12.8 >= 12.8 of
    torch 2.8.0), shm cleaned (3 leaked (2 semaphores)), disk ok (812.4 GB free, model cached)
checks:
  description:
    - Per check (C(gpus), C(ports), C(driver), C(shm), C(disk), C(gpu_health)) its C(status) (V(ok), V(failed),
      V(cleaned), V(would clean), V(unknown), V(warning)), C(summary), C(problems) (what, why and what to do) and
      C(details). The details are the holders, the ports and their holders, the driver and torch build, the leaked files,
      the model and the free space, and the server's GPUs with their Xids, memory faults and C(dcgmi diag) results.
  returned: always
  type: dict
  sample:
    gpus:
      status: failed
      summary: 2 GPUs, 1 other holder
      problems: ["GPU 0 is held by pid 13118 python3 (user alice, unit session-4.scope, 76800 MiB): runs as alice, not as the service user. ..."]
      details:
        devices: {"0": /dev/nvidia0, "1": /dev/nvidia1}
        holders: [{pid: 13118, user: alice, kind: foreign, gpus: [0], devices: [/dev/nvidia0, /dev/nvidiactl],
                   command: python3 train.py, title: python3, unit: session-4.scope, memory_mib: 76800,
                   reason: "runs as alice, not as the service user"}]
failed_checks:
  description: Names of the checks that failed.
  returned: always
  type: list
  elements: str
  sample: [gpus]
stopped:
  description: The orphans a cleanup stopped (or would stop in check mode), with the last signal sent.
  returned: always
  type: list
  elements: dict
  sample: [{pid: 4242, title: "sglang::scheduler_TP0", user: sglang, signal: SIGTERM, stopped: true, error: null}]
removed:
  description: The leaked shared memory files a cleanup removed (or would remove in check mode).
  returned: always
  type: list
  elements: str
  sample: [/dev/shm/sem.mp-2x9akd1f, /dev/shm/torch_4242_1877651021_0]
rank:
  description:
    - What the ranks of a multi-node deployment must agree on. These are the SGLang version, a digest of the sources
      the SM120 patcher edits, the torch build and its CUDA version, the driver branch and the model revision
      (V(null) when unknown).
  returned: always
  type: dict
  sample: {sglang_version: 0.5.9, sm120_patch: 3f1c0a9b7d2e4c11, torch: 2.8.0, torch_cuda: "12.8", driver_branch: "570",
           model_revision: 8c1d3f6a0b2e4d5f6a7b8c9d0e1f2a3b4c5d6e7f}
unit_active:
  description: Whether O(unit) was active when the check ran.
  returned: always
  type: bool
  sample: false
commands:
  description: The commands the check ran, with their exit codes.
  returned: always
  type: list
  elements: dict
  sample: [{argv: [/usr/bin/systemctl, show, --no-pager, -p, 'ActiveState,User', --, sglang.service], rc: 0}]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _checks as pf
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _host as ph


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ph.gpu_check_options(),
            server_args=dict(type='dict', default={}),
            python=dict(type='path'),
            working_directory=dict(type='path', default='/'),
            shm_dir=dict(type='path', default='/dev/shm'),
            min_free_gb=dict(type='float', default=2.0),
            checks=dict(type='list', elements='str', choices=list(pf.CHECKS), default=list(pf.CHECKS)),
            gpu_health=dict(type='str', choices=['fail', 'warn'], default='fail'),
            kernel_log=dict(type='path'),
            nvidia_smi=dict(type='path'),
            dcgm_diag=dict(type='bool', default=True),
            unit_stopped=dict(type='bool', default=False),
            fail_on_problems=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    result = ph.preflight(module, module.params)
    if not result['ok'] and module.params['fail_on_problems']:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
