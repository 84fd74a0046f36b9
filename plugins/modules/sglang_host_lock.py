#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_host_lock
short_description: Take or release a host-side lock around the restart and readiness wait of one SGLang server
version_added: 0.2.0
description:
  - Two controllers that deploy the same host at once (two operators, or AWX and a laptop) must never interleave two
    restarts of one server. With O(state=present) this module takes the lock at O(path) for this run, waiting (on the
    controller, bounded by O(timeout)) while another run holds it; with O(state=absent) it releases the lock this run
    holds and leaves anyone else's alone.
  - The lock is a small JSON record (who holds it, since when, its lease) replaced atomically, with a short C(flock)
    on C(<path>.guard) around each read-decide-write, so it outlives one task and two runs arriving at the same
    moment cannot both take it.
  - A lock whose holder is gone is taken over, never waited out forever. It is stale when its lease (O(lease)) ran out,
    when the host rebooted since it was taken (boot id), or when the holder is an C(ansible-playbook) process of this
    same controller host that no longer exists (checked on the controller, by pid and process start time, so a
    controller killed with SIGKILL does not block its own rerun).
  - The action plugin of the same name does the waiting and prints one line per host while it waits.
options:
  path:
    description:
      - The lock file, for example V(/run/lock/llmops-sglang/sglang.lock). Its directory is created when missing.
        Under C(/run) a reboot releases every lock.
    type: path
    required: true
  state:
    description:
      - V(present) takes the lock (or renews it, given O(token)); V(absent) releases the lock O(token) names.
    type: str
    choices: [present, absent]
    default: present
  token:
    description:
      - The RV(token) a previous O(state=present) returned. Required with O(state=absent); with O(state=present) it
        renews this run's own lock instead of waiting for itself.
    type: str
  lease:
    description:
      - Seconds the lock stays valid without being renewed. Make it longer than the longest restart and readiness
        wait you expect; a holder that is gone without releasing blocks others at most this long.
    type: int
    default: 3600
  timeout:
    description:
      - Seconds to wait for a lock another run holds, then fail naming the holder.
    type: int
    default: 600
  sleep:
    description: Seconds between two attempts while waiting.
    type: float
    default: 2
  holder:
    description:
      - Who takes the lock. The action plugin fills it with this controller's host name, user and C(ansible-playbook)
        process; set O(holder.play) to name the run in the message others see.
    type: dict
    default: {}
    suboptions:
      controller:
        description: Host name of the controller.
        type: str
      user:
        description: User running the playbook.
        type: str
      pid:
        description: Process id of C(ansible-playbook) on the controller.
        type: int
      pid_start:
        description: Start time of that process (C(/proc/<pid>/stat) field 22), so a reused pid is not mistaken for it.
        type: str
      play:
        description: A name for the run, shown to whoever waits for it.
        type: str
  _break_token:
    description:
      - Internal. The token of a lock whose holder the action plugin found gone on this controller. Do not set it.
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  check_mode:
    details: Reports whether the lock would be taken or released and writes nothing; it never waits.
  idempotent:
    support: partial
    details: Releasing twice, or renewing one's own lock, changes nothing; every O(state=present) without O(token) takes a new lock.
notes:
  - Release the lock in an C(always:) section so a failed start does not keep it; a killed controller cannot, which is
    what the stale rules are for.
seealso:
  - module: llmops.sglang.wait_for_sglang
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Restart and wait while holding the host lock
  block:
    - name: Take the SGLang lock of this host
      llmops.sglang.sglang_host_lock:
        path: /run/lock/llmops-sglang/sglang.lock
        lease: 2400
        timeout: 900
      register: sglang_lock

    - name: Restart SGLang
      ansible.builtin.systemd_service:
        name: sglang.service
        state: restarted

    - name: Wait until SGLang is ready
      llmops.sglang.wait_for_sglang:
        unit: sglang.service
        url: http://127.0.0.1:30000
        timeout: 1800
  always:
    - name: Release the SGLang lock of this host
      llmops.sglang.sglang_host_lock:
        path: /run/lock/llmops-sglang/sglang.lock
        state: absent
        token: "{{ sglang_lock.token }}"
      when: sglang_lock.token | default('') | length > 0
'''

RETURN = r'''
acquired:
  description: Whether this run holds the lock now.
  returned: always
  type: bool
  sample: true
token:
  description: The lock's token when this run holds it; pass it to O(state=absent) to release it.
  returned: always
  type: str
  sample: 9c4e1f0a2b7d4c55a1f3e8d2b6a0c9e1
action:
  description: What was done, V(acquire), V(renew), V(release), V(wait) (held by another run) or V(none).
  returned: always
  type: str
  sample: acquire
reason:
  description: Why, in a few words.
  returned: always
  type: str
  sample: "taken over: the lease of root@laptop (ansible-playbook pid 4121) ran out 12 s ago"
stale:
  description: Why an existing lock was taken over, or an empty string.
  returned: always
  type: str
  sample: ""
held_by:
  description: The record of the other run's lock (when waiting, when it was taken over, or when a release left it alone).
  returned: always
  type: dict
  sample: {"token": "0d1c...", "holder": {"controller": "awx-1", "user": "awx", "pid": 771, "pid_start": "81234",
           "play": "deploy"}, "acquired_at": 1764590000.0, "renewed_at": 1764590000.0, "lease": 3600, "boot_id": "..."}
damaged:
  description: Set when the lock file held something that was not a lock record (it was replaced).
  returned: always
  type: str
  sample: ""
waited_for:
  description:
    - The holder of the other run's lock this run waited for before it took the lock (controller, user, pid, play), or
      V(null) when it did not wait. That run may have changed the host meanwhile.
  returned: always
  type: dict
  sample: {"controller": "awx-1", "user": "awx", "pid": 771, "play": "deploy"}
  version_added: 0.3.0
waited:
  description: Seconds the action plugin waited for another run's lock.
  returned: always
  type: float
  sample: 0.0
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.deploy._lock import Holder, Request, apply


def argument_spec():
    holder = dict(controller=dict(type='str'), user=dict(type='str'), pid=dict(type='int'),
                  pid_start=dict(type='str'), play=dict(type='str'))
    return dict(
        path=dict(type='path', required=True),
        state=dict(type='str', choices=['present', 'absent'], default='present'),
        token=dict(type='str', no_log=False),
        lease=dict(type='int', default=3600),
        timeout=dict(type='int', default=600),
        sleep=dict(type='float', default=2),
        holder=dict(type='dict', default={}, options=holder),
        _break_token=dict(type='str', no_log=False),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           required_if=[('state', 'absent', ('token',))])
    p = module.params
    if p['lease'] <= 0:
        module.fail_json(msg='lease must be a positive number of seconds, got %d' % p['lease'])
    holder = Holder(**dict((k, v if v is not None else Holder.__dataclass_fields__[k].default)
                           for k, v in p['holder'].items()))
    request = Request(state=p['state'], holder=holder, lease=float(p['lease']), token=p['token'] or '',
                      break_token=p['_break_token'] or '')
    try:
        outcome = apply(p['path'], request, check_mode=module.check_mode)
    except OSError as exc:
        module.fail_json(msg='cannot use the lock file %s: %s; check that its directory is writable by the connecting '
                             'user' % (p['path'], exc), exception=exc)
    result = outcome.to_json()
    result.update(changed=outcome.changed, waited=0.0)
    if outcome.damage:
        module.warn(outcome.damage)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
