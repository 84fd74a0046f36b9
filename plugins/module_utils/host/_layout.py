# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A service's account, directories and log file as wanted: observe, decide, apply (llmops.sglang.sglang_service_layout).

What ansible.builtin's group, getent, user and file modules did for the sglang_service role in seven module runs per
host, in one: a system group, a system user in it (its home, no login shell, the device groups that exist on the host
appended), directories with owner and mode (missing parents made with them too, as the file module does) and a log
file created if missing (owner, group and mode set; its times left alone).

``decide_account`` and ``decide_path`` are pure over what ``observe_*`` read; ``apply`` carries out what they decided.
Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


class LayoutError(Exception):
    """A step could not be done: ``msg`` names what and the command's or the system's error."""

    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg


@dataclass(frozen=True)
class Account:
    """The wanted system account: ``groups`` are supplementary groups to add where they exist (never removed)."""

    user: str
    group: str
    home: str
    shell: str = '/usr/sbin/nologin'
    groups: Tuple[str, ...] = ()


@dataclass(frozen=True)
class PathSpec:
    """A wanted directory (``kind`` directory) or file (``kind`` file: created empty when missing)."""

    path: str
    owner: str
    group: str
    mode: int
    kind: str = 'directory'


@dataclass
class Action:
    """One change: the command or file operation, what it changes (for the result's ``changes``) and its diff."""

    what: str
    argv: Optional[List[str]] = None
    path: Optional[PathSpec] = None
    create: bool = False
    before: Dict[str, object] = field(default_factory=dict)
    after: Dict[str, object] = field(default_factory=dict)


def observe_user(name):
    """{gid, groups (supplementary, by name), home, shell} of NAME, or None."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    groups = sorted(g.gr_name for g in grp.getgrall() if name in g.gr_mem)
    return {'gid': entry.pw_gid, 'groups': groups, 'home': entry.pw_dir, 'shell': entry.pw_shell}


def observe_group(name):
    """The gid of group NAME, or None."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def decide_account(want, group_gid, user, existing_groups):
    """The commands that make the account WANT from what is there: GROUP_GID (None: missing), USER (observe_user or
    None) and EXISTING_GROUPS (the names of the host's groups; supplementary groups that do not exist are left out,
    as the role's getent filter did). Pure."""
    actions = []
    if group_gid is None:
        actions.append(Action('group %s created' % want.group, ['groupadd', '--system', want.group],
                              before={'group': want.group, 'state': 'absent'}, after={'group': want.group, 'state': 'present'}))
    groups = [g for g in want.groups if g in existing_groups]
    if user is None:
        argv = ['useradd', '--system', '--gid', want.group, '--shell', want.shell, '--home-dir', want.home, '--no-create-home']
        argv += ['--groups', ','.join(groups)] if groups else []
        actions.append(Action('user %s created' % want.user, argv + [want.user], before={'user': want.user, 'state': 'absent'},
                              after={'user': want.user, 'state': 'present', 'group': want.group, 'groups': groups,
                                     'home': want.home, 'shell': want.shell}))
        return actions
    argv, before, after = [], {}, {}
    if group_gid is None or user['gid'] != group_gid:
        argv += ['-g', want.group]
        before['gid'], after['group'] = user['gid'], want.group
    missing = [g for g in groups if g not in user['groups']]
    if missing:
        argv += ['-a', '-G', ','.join(missing)]
        before['groups'], after['groups'] = user['groups'], sorted(set(user['groups']) | set(missing))
    if user['shell'] != want.shell:
        argv += ['-s', want.shell]
        before['shell'], after['shell'] = user['shell'], want.shell
    if user['home'] != want.home:
        argv += ['-d', want.home]
        before['home'], after['home'] = user['home'], want.home
    if argv:
        actions.append(Action('user %s changed (%s)' % (want.user, ', '.join(sorted(after))), ['usermod'] + argv + [want.user],
                              before=dict(before, user=want.user), after=dict(after, user=want.user)))
    return actions


def observe_path(path):
    """{kind, uid, gid, mode} of PATH (a symlink followed, as the file module does), or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    kind = 'directory' if stat.S_ISDIR(st.st_mode) else 'file' if stat.S_ISREG(st.st_mode) else 'other'
    return {'kind': kind, 'uid': st.st_uid, 'gid': st.st_gid, 'mode': stat.S_IMODE(st.st_mode)}


def _ids(spec):
    """(uid, gid) of SPEC's owner and group, None for one that does not exist (yet: check mode before the account)."""
    try:
        uid = pwd.getpwnam(spec.owner).pw_uid
    except KeyError:
        uid = None
    try:
        gid = grp.getgrnam(spec.group).gr_gid
    except KeyError:
        gid = None
    return uid, gid


def decide_path(spec, seen, ids):
    """The action for one directory or file: SEEN is observe_path's, IDS the (uid, gid) SPEC names. Pure."""
    after = {'path': spec.path, 'state': spec.kind, 'owner': spec.owner, 'group': spec.group, 'mode': '%04o' % spec.mode}
    if seen is None:
        return Action('%s %s created' % (spec.kind, spec.path), path=spec, create=True,
                      before={'path': spec.path, 'state': 'absent'}, after=after)
    if seen['kind'] != spec.kind:
        raise LayoutError('%s exists and is not a %s (%s); nothing was changed' % (spec.path, spec.kind, seen['kind']))
    uid, gid = ids
    before = {'path': spec.path, 'state': spec.kind}
    differs = []
    if uid is None or seen['uid'] != uid:
        differs.append('owner')
        before['owner'] = seen['uid']
    if gid is None or seen['gid'] != gid:
        differs.append('group')
        before['group'] = seen['gid']
    if seen['mode'] != spec.mode:
        differs.append('mode')
        before['mode'] = '%04o' % seen['mode']
    if not differs:
        return None
    return Action('%s %s: %s' % (spec.kind, spec.path, ', '.join(differs)), path=spec, before=before,
                  after=dict((k, v) for k, v in after.items() if k in before))


def _set_attributes(spec):
    uid, gid = _ids(spec)
    if uid is None or gid is None:
        raise LayoutError('%s: no user %s or group %s on the host' % (spec.path, spec.owner, spec.group))
    os.chown(spec.path, uid, gid)
    os.chmod(spec.path, spec.mode)


def _create(spec):
    if spec.kind == 'file':
        fd = os.open(spec.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        _set_attributes(spec)
        return
    missing = []
    path = spec.path.rstrip('/') or '/'
    while not os.path.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        os.mkdir(directory, 0o700)
        _set_attributes(PathSpec(directory, spec.owner, spec.group, spec.mode))


def apply(action, run):
    """Carry out ACTION (RUN: a host/_command runner for the account's commands)."""
    try:
        if action.argv is not None:
            rc, out, err = run(action.argv)
            if rc != 0:
                raise LayoutError('%s failed (rc=%d): %s' % (' '.join(action.argv), rc, (err or out).strip()[-300:]))
        elif action.create:
            _create(action.path)
        else:
            _set_attributes(action.path)
    except OSError as err:
        raise LayoutError('%s: %s' % (action.path.path if action.path else action.what, err)) from None


def plan_paths(paths):
    """The actions for PATHS, in order (a parent before what it holds)."""
    out = []
    for spec in paths:
        action = decide_path(spec, observe_path(spec.path), _ids(spec))
        if action is not None:
            out.append(action)
    return out
