#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_config_file
short_description: Write an SGLang unit or environment file atomically, saying plainly when its disk is full
version_added: 0.2.0
description:
  - Makes the file at O(dest) hold exactly O(content) with O(owner), O(group) and O(mode). The new content is
    written to a temporary file beside O(dest), which gets its owner and mode (and, with O(verify), is checked) before
    it replaces O(dest) in one rename; a file that already holds O(content) is not rewritten.
  - A full file system fails the task with the path, the free and the needed bytes (RV(no_space)), and O(dest) is left
    exactly as it was. Any other failure leaves it as it was too.
  - The P(llmops.sglang.sglang_service#role) role writes its unit and environment files with it (rendered with
    P(ansible.builtin.template#lookup)), the P(llmops.sglang.nvidia_driver#role) role its apt repository file and pin.
  - Unlike M(ansible.builtin.copy), whose action plugin makes a temporary directory on the host even in check mode, it
    takes the content as an argument, so with pipelining check mode writes nothing on the host.
  - For a file with secrets set O(secret=true) (and C(no_log) on the task). Its content is then never returned, not
    even in the diff, which shows C((content hidden - secret)); without it the diff of a unit file stays readable.
options:
  dest:
    description: The file to write. Its directory must exist.
    type: path
    required: true
  content:
    description: The whole content of the file (text, written as UTF-8).
    type: str
    required: true
  owner:
    description: User name (or numeric id) that owns the file.
    type: str
    default: root
  group:
    description: Group name (or numeric id) of the file.
    type: str
    default: root
  mode:
    description: Permissions as an octal string, for example V('0644') or V('0600').
    type: str
    default: '0644'
  backup:
    description:
      - Keep the old file under a timestamped name (returned as RV(backup_file)) when it is replaced, for a rollback.
        The copy is a hard link to the old file, so it needs no free space.
    type: bool
    default: false
  secret:
    description:
      - The file holds secrets (an API key, C(HF_TOKEN)). The diff shows C((content hidden - secret)) instead of the
        old and new content; the module returns the content nowhere else.
    type: bool
    default: false
    version_added: 0.2.0
  verify:
    description:
      - V(systemd-unit) runs C(systemd-analyze verify) on the new content, under the name of O(dest); any output (a
        warning too) or a non-zero exit fails the task and O(dest) is left as it was. V(none) checks nothing.
    type: str
    choices: [none, systemd-unit]
    default: none
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: Reads the file and reports whether it would change (and the diff); writes nothing.
  diff_mode:
    support: full
seealso:
  - module: ansible.builtin.template
  - module: ansible.builtin.copy
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Write the systemd unit
  llmops.sglang.sglang_config_file:
    dest: /etc/systemd/system/sglang.service
    content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
    verify: systemd-unit
    backup: true
  register: unit_file

- name: Write the secret environment file
  llmops.sglang.sglang_config_file:
    dest: /etc/sglang/sglang.secret.env
    content: "HF_TOKEN={{ hf_token }}\n"
    mode: '0600'
  no_log: true
'''

RETURN = r'''
dest:
  description: The file written (O(dest)).
  returned: always
  type: str
  sample: /etc/systemd/system/sglang.service
created:
  description: Whether O(dest) did not exist before (in check mode - whether it would be created).
  returned: always
  type: bool
  sample: false
  version_added: 0.2.0
backup_file:
  description: The copy of the old file kept by O(backup).
  returned: when a backup was made
  type: str
  sample: /etc/systemd/system/sglang.service.1234.2026-12-01@10:00:00~
no_space:
  description:
    - The file system of O(dest) is full; O(dest) was left as it was. C(free) and C(needed) are bytes (C(free) is what
      an unprivileged writer may still use there, measured after the failed write).
  returned: failure on a full file system
  type: dict
  sample: {path: /etc/systemd/system/sglang.service, free: 0, needed: 1604}
verify_output:
  description: What C(systemd-analyze verify) printed about the new content.
  returned: failure of O(verify)
  type: str
  sample: "sglang.service:12: Unknown key name 'RestartSecs' in section 'Service', ignoring."
'''

import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.host import _config_file as cf
from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import NoSpaceError
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner


def _id(name, database, what):
    if name.isdigit():
        return int(name)
    try:
        return database(name)
    except KeyError:
        raise ValueError('%s %s does not exist on this host: create it first (or give a numeric id)' % (what, name))


def _wanted(p):
    try:
        mode = int(p['mode'], 8)
    except ValueError:
        raise ValueError("mode %r is not an octal mode such as '0644'" % p['mode'])
    if not 0 <= mode <= 0o7777:
        raise ValueError("mode %r is not an octal mode such as '0644'" % p['mode'])
    return cf.Wanted(content=p['content'].encode('utf-8'),
                     uid=_id(p['owner'], lambda n: pwd.getpwnam(n).pw_uid, 'user'),
                     gid=_id(p['group'], lambda n: grp.getgrnam(n).gr_gid, 'group'), mode=mode)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type='path', required=True),
            content=dict(type='str', required=True),
            owner=dict(type='str', default='root'),
            group=dict(type='str', default='root'),
            mode=dict(type='str', default='0644'),
            backup=dict(type='bool', default=False),
            secret=dict(type='bool', default=False),
            verify=dict(type='str', choices=['none', 'systemd-unit'], default='none'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    dest = p['dest']
    if p['secret']:
        # masked wherever AnsibleModule returns it (the invocation's module_args, which -vvv prints from the raw output)
        module.no_log_values.add(p['content'])
    try:
        wanted = _wanted(p)
    except ValueError as err:
        module.fail_json(msg='%s: %s' % (dest, err), dest=dest)
    now = cf.observe(dest)
    plan = cf.decide(now, wanted)
    result = dict(changed=plan.changed, dest=dest, created=now.content is None)
    if module._diff and plan.write:
        if p['secret']:
            hidden = '(content hidden - secret)\n'
            result['diff'] = dict(before=hidden if now.content else '', after=hidden, before_header=dest, after_header=dest)
        else:
            result['diff'] = dict(before=(now.content or b'').decode('utf-8', 'replace'), after=p['content'],
                                  before_header=dest, after_header=dest)
    if module.check_mode or not plan.changed:
        module.exit_json(**result)
    verify = None
    if p['verify'] == 'systemd-unit':
        verify = cf.unit_verifier(os.path.basename(dest), module_runner(module),
                                  module.get_bin_path('systemd-analyze', required=True))
    try:
        if plan.write:
            kept = cf.write(dest, wanted, verify, backup=p['backup'])
            if kept:
                result['backup_file'] = kept
        else:
            cf.apply_attributes(dest, wanted)
    except NoSpaceError as err:
        module.fail_json(msg=err.strerror, dest=dest, no_space=err.to_json())
    except cf.VerifyError as err:
        module.fail_json(msg=err.msg, dest=dest, verify_output=err.output)
    except OSError as err:
        module.fail_json(msg='Cannot write %s: %s; it was left as it was. Run the task as root (become: true) or '
                             'check the directory exists.' % (dest, err), dest=dest)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
