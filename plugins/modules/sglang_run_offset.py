#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_run_offset
short_description: Find where the current run of an SGLang unit starts in its log file
version_added: 0.2.0
description:
  - Reads the C(InvocationID) of O(unit) (systemd gives every start a new one, also its own restarts) and the record at
    O(path). While the unit still runs the recorded invocation, the recorded offset is the start of the current run;
    otherwise the run started after O(log_size) bytes, and the record is replaced with the new invocation and offset.
  - M(llmops.sglang.wait_for_sglang) then reads the log from RV(offset) (its O(llmops.sglang.wait_for_sglang#module:log_offset)),
    so a run that changed nothing still sees its own ready line and lines of earlier runs never count.
  - The P(llmops.sglang.sglang_service#role) role measures O(log_size) right before it (re)starts the unit.
options:
  unit:
    description: systemd unit of the server, for example V(sglang.service).
    type: str
    required: true
  path:
    description:
      - The record file (JSON with C(invocation) and C(offset), mode C(0644), written atomically), for example
        V(/var/lib/sglang/sglang.run.json). Its directory must exist unless in check mode.
    type: path
    required: true
  log_size:
    description:
      - Size in bytes of the log file measured before the unit was last (re)started; the offset of a run that has no
        record yet. V(0) for a new or truncated log.
    type: int
    default: 0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: Reads the unit and the record and returns the offset; writes nothing.
  diff_mode:
    support: none
seealso:
  - module: llmops.sglang.wait_for_sglang
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Measure the log before the restart
  ansible.builtin.stat:
    path: /var/log/sglang/sglang.log
  register: log_before

- name: Restart SGLang
  ansible.builtin.systemd_service:
    name: sglang.service
    state: restarted

- name: Find where the current run starts in the log
  llmops.sglang.sglang_run_offset:
    unit: sglang.service
    path: /var/lib/sglang/sglang.run.json
    log_size: "{{ log_before.stat.size | default(0) }}"
  register: run

- name: Wait for this run only
  llmops.sglang.wait_for_sglang:
    unit: sglang.service
    log_path: /var/log/sglang/sglang.log
    log_offset: "{{ run.offset }}"
'''

RETURN = r'''
offset:
  description: Byte offset of the current run's first line in the log.
  returned: always
  type: int
  sample: 183204
invocation_id:
  description: The unit's current C(InvocationID); empty when the unit is not running.
  returned: always
  type: str
  sample: 4f5b0a3c2d1e4f6a8b9c0d1e2f3a4b5c
recorded:
  description: Whether RV(offset) comes from the record (the unit still runs the recorded invocation).
  returned: always
  type: bool
  sample: true
damaged:
  description:
    - The run record when it was not one (not JSON, a field missing or of the wrong type), else V(null). It is renamed
      to C(<path>.damaged-<UTC time>) (not in check mode) and the offset is measured anew; a warning says so.
  returned: always
  type: dict
  sample: {"path": "/var/lib/sglang/sglang.run.json", "why": "run record.offset is a string, not an integer",
           "kept_as": "/var/lib/sglang/sglang.run.json.damaged-20261202T101500Z"}
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _run_offset as ro
from ansible_collections.llmops.sglang.plugins.module_utils.host import _systemd as systemd
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner
from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import StateReadError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type='str', required=True),
            path=dict(type='path', required=True),
            log_size=dict(type='int', default=0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        props = systemd.show(p['unit'], ('InvocationID',), module_runner(module), module.get_bin_path('systemctl', required=True))
    except systemd.SystemdError as err:
        module.fail_json(msg=err.msg, rc=err.rc)
    invocation = props.get('InvocationID', '')
    try:
        recorded, damage = ro.read(p['path'], check_mode=module.check_mode)
    except StateReadError as err:
        module.fail_json(msg=err.msg)
    if damage:
        module.warn(damage.message('run record'))
    current = ro.decide(recorded, invocation, p['log_size'])
    changed = current != recorded
    if changed and not module.check_mode:
        try:
            ro.write(p['path'], current)
        except OSError as err:
            module.fail_json(msg='Cannot write the run record %s: %s. Create its directory first.' % (p['path'], err))
    module.exit_json(changed=changed, offset=current.offset, invocation_id=invocation, recorded=current is recorded,
                     damaged=damage.to_json() if damage else None)


if __name__ == '__main__':
    main()
