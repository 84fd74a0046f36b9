# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Installing named NVIDIA driver packages at a version, and which packages to hold: the nvidia_driver role's install.

Private module_utils of llmops.sglang.nvidia_driver_match (option ``install_packages``).  The transaction, its read-back,
the restore and the holds run through the same :class:`nvidia._fix.PackageBackend` as the drift fix; this file only
decides, as pure functions: which pins to ask for (:func:`plan_install`) and what to hold (:func:`hold_names`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._packages import split_debian_version


@dataclass
class InstallPlan:
    """What the transaction asks for and what it must leave installed.

    ``pins``: exact pins, names of absent packages (any version), module specs (``@nvidia-driver:535-dkms``);
    ``wanted``: ``{name: version or None}`` installed afterwards; ``present``: named packages already as asked;
    ``unavailable``: ``[{'name', 'reason'}]`` no candidate at the version.
    """

    pins: list = field(default_factory=list)
    wanted: dict = field(default_factory=dict)
    present: list = field(default_factory=list)
    unavailable: list = field(default_factory=list)

    def to_json(self):
        return asdict(self)


def spec_root(name):
    """The package a name stands for: a dnf module spec ``@nvidia-driver:535-dkms[/profile]`` installs ``nvidia-driver``."""
    if name.startswith('@'):
        return name[1:].split(':', 1)[0].split('/', 1)[0]
    return name


def upstream(version, database):
    """The upstream part of an installed or listed version (dpkg ``[epoch:]upstream-revision``, rpm ``[epoch:]version-release``)."""
    if database == 'dpkg':
        return split_debian_version(version)[1]
    return version.split(':', 1)[-1].partition('-')[0]


def pick_version(listed, version, database):
    """The first of the repositories' versions (newest first) whose upstream is ``version``, as the backend pins it
    (rpm without the epoch), or None."""
    for candidate in listed or []:
        if upstream(candidate, database) == version:
            return candidate if database == 'dpkg' else candidate.split(':', 1)[-1]
    return None


def plan_install(backend, names, version, installed, available):
    """The :class:`InstallPlan` for ``names`` at upstream ``version`` (empty: any version, installed ones stay as they are).

    ``installed`` and ``available`` are the backend's :meth:`installed_versions` and :meth:`available_versions`.  Module
    specs are always asked for: the dry run says whether they change anything.
    """
    plan = InstallPlan()
    for name in names:
        if name.startswith('@'):
            plan.pins.append(name)
            continue
        current = installed.get(name)
        if current and (not version or upstream(current, backend.database) == version):
            plan.present.append(name)
            continue
        if not version:
            plan.pins.append(name)
            plan.wanted[name] = None
            continue
        target = pick_version((available or {}).get(name), version, backend.database)
        if target is None:
            listed = ', '.join((available or {}).get(name) or []) or 'none'
            plan.unavailable.append({'name': name, 'reason': 'no version %s of %s is available from the configured repositories '
                                                             '(they offer: %s)' % (version, name, listed)})
            continue
        plan.pins.append(backend.pin(name, target))
        plan.wanted[name] = target
    return plan


def hold_names(names, userspace, closure):
    """What the install holds: the named packages (a module spec's package), every user-space driver package, and the
    packages the backend's :meth:`hold_closure` reached from them."""
    return sorted(set(spec_root(name) for name in names) | set(userspace) | set(closure))


def render_install(names, versions, held):
    """The diff text of one side: a line per named package, then the holds."""
    lines = ['package %s %s' % (spec_root(name), versions.get(spec_root(name)) or 'not installed') for name in names]
    lines.append('held: %s' % (', '.join(held) or 'none'))
    return '\n'.join(lines) + '\n'
