#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: nvidia_driver_deploy
short_description: One step of the nvidia_driver role, returning the role's one public result
version_added: 0.2.0
description:
  - The steps of the P(llmops.sglang.nvidia_driver#role) role. Each reads the role's inputs (its variables) and what the
    earlier steps of this run found, and returns the role's result, which the role registers as C(nvidia_driver_result).
  - The decisions (version or branch, package source, kernel-module flavor, packages, repository files, refusals,
    whether a reboot is due) are a pure plan computed on the controller (C(plugins/plugin_utils/_nvidia_plan.py)); the host
    is read with C(ansible.builtin.setup) (minimal subset, not set as facts) and M(llmops.sglang.nvidia_driver_info), and
    changed only through M(llmops.sglang.nvidia_driver_match) and the role's package-manager tasks.
  - This plugin is internal to the role; call the role, not the plugin.
  - This plugin runs on the controller; its steps run modules on the host.
options:
  step:
    description:
      - V(plan) reads the host once and plans (with C(nvidia_driver_manage=false) it only reports what
        M(llmops.sglang.nvidia_driver_match) sees, in check mode, and never fails).
      - V(streams) enables the branch's C(nvidia-driver) module stream (Red Hat family, below R590).
      - V(install) installs and holds the packages in one transaction and decides whether a reboot is due.
      - V(verify) proves that the loaded kernel module and user space match.
    type: str
    required: true
    choices: [plan, streams, install, verify]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  check_mode:
    details: The host is read as in a real run; the install runs M(llmops.sglang.nvidia_driver_match) in check mode.
seealso:
  - module: llmops.sglang.nvidia_driver_match
  - module: llmops.sglang.nvidia_driver_info
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
# Inside the role only; a playbook includes the role and reads its result:
- name: Install the NVIDIA driver
  ansible.builtin.include_role:
    name: llmops.sglang.nvidia_driver

- name: Say what it found
  ansible.builtin.debug:
    msg: "{{ nvidia_driver_result.status }}: {{ nvidia_driver_result.msg }}"
'''

RETURN = r'''
status:
  description:
    - V(match) (the loaded module and user space match), V(drift), V(reboot pending) (the module on disk is not the loaded
      one and the role did not reboot), V(would install) (C(--check), with the packages the install step would install; the
      match is proved by a run without C(--check)), V(report) (C(nvidia_driver_manage=false), or not verified yet).
  returned: always
  type: str
  sample: match
msg:
  description: One line that says what was found or what failed, and what to try.
  returned: always
  type: str
  sample: NVIDIA kernel module 580.95.05 and user space match
changed:
  description: After the role, whether it changed the host (the PLAY RECAP counts a change on the host exactly then).
  returned: always
  type: bool
plan:
  description:
    - The plan (C(version), C(branch), C(archs), C(source), C(flavor), C(names), C(kernel_side), C(package_manager),
      C(refusals), C(install), the repository files and C(headers)); V(null) in report-only mode.
  returned: always
  type: dict
host:
  description: The platform facts the plan read (C(os_family), C(distribution), C(kernel), C(architecture), ...).
  returned: when the role manages the driver
  type: dict
reboot:
  description: After the install, C(kernel_changed), C(reboot) (the role reboots), C(loaded), C(on_disk) and C(msg).
  returned: after the install step
  type: dict
match:
  description: The comparison of M(llmops.sglang.nvidia_driver_match) (V(null) when unknown).
  returned: after the verify step, or in report-only mode
  type: bool
kernel_module:
  description: The loaded kernel module (M(llmops.sglang.nvidia_driver_match)'s RV(llmops.sglang.nvidia_driver_match#module:kernel_module)).
  returned: after the verify step, or in report-only mode
  type: dict
userspace:
  description: The user-space driver found (M(llmops.sglang.nvidia_driver_match)'s RV(llmops.sglang.nvidia_driver_match#module:userspace)).
  returned: after the verify step, or in report-only mode
  type: dict
reason:
  description: M(llmops.sglang.nvidia_driver_match)'s verdict in one line.
  returned: after the verify step, or in report-only mode
  type: str
installed:
  description: The install's result (M(llmops.sglang.nvidia_driver_match) with C(install_packages)).
  returned: after the install step
  type: dict
failure:
  description: The step that failed (C(step), C(msg), C(result)), V(null) when none did.
  returned: always
  type: dict
'''
