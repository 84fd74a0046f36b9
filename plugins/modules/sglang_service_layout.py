#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_service_layout
short_description: Create an SGLang server's system account, its directories, its log file and its compile caches
version_added: 0.3.0
description:
  - Makes, in one module run, the system group O(group), the system user O(user) in it (home O(home), not created;
    shell O(shell); the groups of O(groups) that exist on the host appended, never removed), the directories of
    O(paths) with their owner, group and mode (missing parents are made with them too), and the files of O(paths),
    created empty when missing, with their owner, group and mode (their times are left alone).
  - With O(compile_cache), then the server's compile, JIT and autotune cache directories of this SGLang version and
    GPU, as M(llmops.sglang.sglang_compile_cache) makes them (the same code, its result in RV(compile_cache)), in one
    module run and one module payload fewer per deploy than running both modules.
  - Each part changes only what differs. The P(llmops.sglang.sglang_service#role) role runs it where it ran
    M(ansible.builtin.group), M(ansible.builtin.getent), M(ansible.builtin.user) and M(ansible.builtin.file) (seven
    module runs and four module payloads per host before).
options:
  user:
    description: The system user. Leave it out to manage only the paths.
    type: str
  group:
    description: The user's primary group (created as a system group when missing). Required with O(user).
    type: str
  home:
    description: The user's home directory (not created; give it in O(paths)). Required with O(user).
    type: path
  shell:
    description: The user's login shell.
    type: path
    default: /usr/sbin/nologin
  groups:
    description: Supplementary groups of the user, appended; a group the host does not have is left out.
    type: list
    elements: str
    default: []
  paths:
    description:
      - Directories and files, in order (a parent before what it holds). A missing directory is made with its missing
        parents, each with the same owner, group and mode; a missing file is created empty.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory or file.
        type: path
        required: true
      state:
        description: V(directory) or V(file) (a file's directory must exist or come before it in O(paths)).
        type: str
        choices: [directory, file]
        default: directory
      owner:
        description: Its owner.
        type: str
        required: true
      group:
        description: Its group.
        type: str
        required: true
      mode:
        description: Its mode, octal, for example V('0750').
        type: str
        required: true
  compile_cache:
    description:
      - The compile cache directories to make after the account and the paths, with the options of
        M(llmops.sglang.sglang_compile_cache). Leave it out to make none.
    type: dict
    suboptions:
      root:
        description: As O(llmops.sglang.sglang_compile_cache#module:root), for example V(/var/cache/sglang).
        type: path
        required: true
      version:
        description: As O(llmops.sglang.sglang_compile_cache#module:version).
        type: str
        required: true
      arch:
        description: As O(llmops.sglang.sglang_compile_cache#module:arch) (default read from C(nvidia-smi)).
        type: str
      owner:
        description: As O(llmops.sglang.sglang_compile_cache#module:owner), usually O(user).
        type: str
      group:
        description: As O(llmops.sglang.sglang_compile_cache#module:group), usually O(group).
        type: str
      keep:
        description: As O(llmops.sglang.sglang_compile_cache#module:keep).
        default: 3
        type: int
      environment:
        description: As O(llmops.sglang.sglang_compile_cache#module:environment).
        default: {}
        type: dict
notes:
  - Linux with C(groupadd), C(useradd) and C(usermod) (shadow-utils). SELinux contexts and ACLs are left as they are.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
seealso:
  - module: llmops.sglang.sglang_compile_cache
  - module: ansible.builtin.user
  - module: ansible.builtin.file
attributes:
  check_mode:
    support: full
    details: Reports what it would create or change and changes nothing.
  diff_mode:
    support: full
    details: One entry per account or path it changes (before and after).
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: The server's account, directories and log file
  llmops.sglang.sglang_service_layout:
    user: sglang
    group: sglang
    home: /var/lib/sglang
    groups: [video, render]
    paths:
      - {path: /etc/sglang, owner: root, group: root, mode: '0755'}
      - {path: /var/lib/sglang, owner: sglang, group: sglang, mode: '0750'}
      - {path: /var/log/sglang, owner: root, group: sglang, mode: '0750'}
      - {path: /var/log/sglang/sglang.log, state: file, owner: root, group: sglang, mode: '0640'}
    compile_cache:
      root: /var/cache/sglang
      version: "0.5.9"
      owner: sglang
      group: sglang
  register: layout

- name: The cache variables for the server's environment file
  ansible.builtin.debug:
    var: layout.compile_cache.environment
'''

RETURN = r'''
changes:
  description: What it created or changed (or would, in check mode), in order.
  returned: always
  type: list
  elements: str
  sample: ["group sglang created", "user sglang created", "directory /var/lib/sglang created"]
compile_cache:
  description:
    - The result of the compile caches, as M(llmops.sglang.sglang_compile_cache) returns it (C(path), C(arch),
      C(environment), C(dirs), C(created), C(pruned), C(msg), C(changed)).
  returned: when O(compile_cache) is given
  type: dict
  sample:
    path: /var/cache/sglang/0.5.9-sm90
    arch: sm90
    environment: {TRITON_CACHE_DIR: /var/cache/sglang/0.5.9-sm90/triton}
    dirs: {triton: /var/cache/sglang/0.5.9-sm90/triton}
    created: [/var/cache/sglang/0.5.9-sm90]
    pruned: []
    msg: /var/cache/sglang/0.5.9-sm90 (GPU sm90)
    changed: true
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.host import _layout as lay
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _compile_cache as cc

PATH_OPTIONS = dict(path=dict(type='path', required=True), state=dict(type='str', choices=['directory', 'file'], default='directory'),
                    owner=dict(type='str', required=True), group=dict(type='str', required=True), mode=dict(type='str', required=True))


def _specs(module, items):
    out = []
    for item in items:
        try:
            mode = int(str(item['mode']), 8)
        except ValueError:
            module.fail_json(msg='%s: mode %r is not an octal number; nothing was changed' % (item['path'], item['mode']))
        out.append(lay.PathSpec(item['path'], item['owner'], item['group'], mode, item['state']))
    return out


def caches(module, spec, changes, diffs):
    """The compile caches after the account (their owner) and the paths: llmops.sglang.sglang_compile_cache's work."""
    try:
        res, diff = cc.prepare(spec, module.check_mode, module_runner(module), module.get_bin_path, want_diff=module._diff)
    except cc.CacheError as err:
        module.fail_json(msg=err.msg, changes=changes)
    if res['changed']:
        changes.append('compile caches %s' % res['msg'])
        if diff is not None:
            diffs.append(diff)
    return res


def main():
    module = AnsibleModule(
        argument_spec=dict(
            user=dict(type='str'), group=dict(type='str'), home=dict(type='path'),
            shell=dict(type='path', default='/usr/sbin/nologin'), groups=dict(type='list', elements='str', default=[]),
            paths=dict(type='list', elements='dict', default=[], options=PATH_OPTIONS),
            compile_cache=dict(type='dict', options=dict(cc.OPTIONS)),
        ),
        required_by=dict(user=('group', 'home')),
        supports_check_mode=True,
    )
    p = module.params
    specs = _specs(module, p['paths'])
    run = module_runner(module)
    changes, diffs = [], []

    def do(actions):
        for action in actions:
            if not module.check_mode:
                lay.apply(action, run)
            changes.append(action.what)
            diffs.append({'before': action.before, 'after': action.after})

    try:
        if p['user']:
            account = lay.Account(p['user'], p['group'], p['home'], p['shell'], tuple(p['groups']))
            existing = set(g.gr_name for g in lay.grp.getgrall())
            do(lay.decide_account(account, lay.observe_group(p['group']), lay.observe_user(p['user']), existing))
        # decided one by one: a directory made above changes what the next one sees
        for spec in specs:
            do(lay.plan_paths([spec]))
    except lay.LayoutError as err:
        module.fail_json(msg=err.msg, changes=changes)
    result = dict(changes=changes)
    if p['compile_cache']:
        result['compile_cache'] = caches(module, p['compile_cache'], changes, diffs)
    result['changed'] = bool(changes)
    if module._diff:
        result['diff'] = diffs
    module.exit_json(**result)


if __name__ == '__main__':
    main()
