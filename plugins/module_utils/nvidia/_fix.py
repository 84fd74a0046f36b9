# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fix for NVIDIA driver drift: which exact packages bring user space to the loaded module, and the one
interface every package tool implements to install and hold them.

Private module_utils of llmops.sglang.nvidia_driver_match.  :func:`plan_fix` is pure (a :class:`nvidia._verdict.Verdict`
and the versions the repositories offer in, exact pins out).  :class:`PackageBackend` is the seam between the fix and
a package tool, after community.docker's engine drivers: the caller holds a backend and never asks which tool it is;
:mod:`nvidia._backends` has the apt and dnf ones.
"""

from __future__ import annotations

import abc
import re
from dataclasses import asdict, dataclass, field

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._packages import KERNEL_SIDE_RE, split_debian_version
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._versions import NAME_BRANCH_RE, version_consistent


class FixError(Exception):
    """The fix could not be planned or applied.

    ``kind`` says which step refused or failed (one of :data:`FIX_ERRORS`), ``packages`` the packages concerned;
    ``context`` says what was seen (argv, rc, stdout, stderr, restored).
    """

    def __init__(self, msg, kind, packages=(), **context):
        super(FixError, self).__init__(msg)
        self.kind = kind
        self.packages = list(packages)
        self.context = context

    def to_json(self):
        return {'kind': self.kind, 'packages': self.packages}


# What a FixError's kind can be: the package tool is missing, its dry run failed, the transaction would remove packages
# it does not replace or touch the kernel side, version locks could not be read or lifted, the install or the hold failed.
FIX_ERRORS = ('no_tool', 'plan_failed', 'would_remove', 'kernel_side', 'no_versionlock', 'unlock_failed', 'install_failed',
              'hold_failed')


def tail(text, limit=2000):
    """The end of a command's output, for messages."""
    return (text or '').strip()[-limit:]


# ---------------------------------------------------------------------------
# Planning (pure)
# ---------------------------------------------------------------------------

@dataclass
class FixPlan:
    """Exact pins that bring every drifted user-space package to the module's version, and what got none, and why."""

    pins: list = field(default_factory=list)
    skipped: list = field(default_factory=list)

    def to_json(self):
        return asdict(self)


def _revision_is_fixed(revision, manager):
    """A packaging revision that does not carry a per-upload counter."""
    if revision is None:
        return False
    if manager == 'dpkg':
        return bool(re.match(r'^(?:0ubuntu)?1$', revision))
    return bool(re.match(r'^1(?:\.(?:el\d+(?:_\d+)*|fc\d+|amzn\d+))?$', revision))


def _pin(pkg, version_release, qualify_arch):
    name = pkg['name']
    if pkg['manager'] == 'dpkg':
        if qualify_arch and pkg.get('arch_qualifier'):
            name = '%s:%s' % (name, pkg['arch_qualifier'])
        return '%s=%s' % (name, version_release)
    pin = '%s-%s' % (name, version_release)
    if qualify_arch and pkg.get('arch'):
        pin = '%s.%s' % (pin, pkg['arch'])
    return pin


def _pick_available(pkg, module_version, available):
    """From the package manager's list of versions, the one whose upstream is the module's."""
    candidates = []
    for version in available or []:
        if pkg['manager'] == 'dpkg':
            dummy, upstream, revision = split_debian_version(version)
            full = version
        else:
            body = version.split(':', 1)[-1]
            upstream, dummy, revision = body.partition('-')
            full = body
        if upstream == module_version:
            candidates.append((revision == pkg['revision'], full))
    if not candidates:
        return None
    # Prefer the installed package's own revision scheme, then the first listed
    # (apt-cache madison and dnf list --showduplicates list the newest first).
    candidates.sort(key=lambda item: not item[0])
    return candidates[0][1]


def _derived_target(pkg, module_version):
    """The module's version in the package's own fixed revision, or ``(None, why not)``."""
    branch = NAME_BRANCH_RE.search(pkg['name'])
    if branch and branch.group('branch') != module_version.split('.', 1)[0]:
        return None, 'the package name carries branch %s, the module is %s' % (branch.group('branch'), module_version)
    if not _revision_is_fixed(pkg['revision'], pkg['manager']):
        return None, 'revision %s carries a per-upload counter; the %s revision cannot be derived' % (pkg['revision'], module_version)
    target = '%s-%s' % (module_version, pkg['revision'])
    if pkg.get('epoch') and pkg['manager'] == 'dpkg':
        target = '%s:%s' % (pkg['epoch'], target)
    return target, None


def plan_fix_packages(packages, module_version, available=None):
    """Exact pins that bring every drifted user-space package to the module's version.

    Without ``available`` (the package manager's versions per package name), a
    pin is derived only when it is certain: same package name, the module's
    version and the same fixed revision (``-1``, ``-0ubuntu1``, ``-1.elN``).
    Revisions with a per-upload counter (``-0ubuntu0.24.04.1``, ``-4~deb12u1``)
    and packages whose name carries another branch are left out.  Returns
    ``(pins, skipped)`` where skipped lists ``{'name', 'reason'}``.
    """
    pins, skipped = [], []
    if not module_version:
        return pins, skipped
    drifted = [pkg for pkg in packages if not version_consistent(pkg['upstream'], module_version)]
    counts = {}
    for pkg in drifted:
        counts[pkg['name']] = counts.get(pkg['name'], 0) + 1
    for pkg in drifted:
        if available is not None:
            target = _pick_available(pkg, module_version, available.get(pkg['name']))
            reason = 'no version %s of %s is available from the configured repositories' % (module_version, pkg['name'])
        else:
            target, reason = _derived_target(pkg, module_version)
        if target is None:
            skipped.append({'name': pkg['name'], 'reason': reason})
            continue
        pin = _pin(pkg, target, counts[pkg['name']] > 1)
        if pin not in pins:
            pins.append(pin)
    return pins, skipped


def plan_fix(verdict, available=None):
    """The :class:`FixPlan` for a :class:`nvidia._verdict.Verdict`: empty unless a module is loaded, user space
    does not provably match and dpkg or rpm packages are installed (pacman is read, never fixed)."""
    fixable = [pkg for pkg in verdict.package_records if pkg['manager'] in ('dpkg', 'rpm')]
    if not verdict.kernel_module_version or not fixable or verdict.match is True:
        return FixPlan()
    pins, skipped = plan_fix_packages(fixable, verdict.kernel_module_version, available)
    return FixPlan(pins=pins, skipped=skipped)


# ---------------------------------------------------------------------------
# The backend seam
# ---------------------------------------------------------------------------

class PackageBackend(abc.ABC):
    """One package tool, as the fix uses it: list versions, dry-run, install exact pins, read back, hold, restore.

    Subclasses implement the tool's commands; :meth:`apply` is the one fix sequence every tool runs.
    """

    name = None            # the package_manager value: apt, dnf
    database = None        # the package database it reads: dpkg, rpm
    install_label = None   # how messages name the install command
    restored_note = None   # the message when a failed install was undone
    restore_failed_note = None

    def __init__(self, host):
        self.host = host

    # -- pins ------------------------------------------------------------------
    @abc.abstractmethod
    def pin(self, name, version):
        """An exact pin of NAME at VERSION in the tool's syntax."""

    @abc.abstractmethod
    def pin_name(self, pin):
        """The package name of a pin."""

    @abc.abstractmethod
    def pin_version(self, pin):
        """The version of a pin, as :meth:`installed_versions` reports it."""

    # -- commands --------------------------------------------------------------
    @abc.abstractmethod
    def available_versions(self, names):
        """``{name: [version, ...]}`` the configured repositories offer (newest first), ``None`` when unknown."""

    @abc.abstractmethod
    def simulate(self, pins, replaced, kernel_side=False):
        """Dry-run installing ``pins``; the :func:`checked_plan`, or FixError when the tool refuses or the plan would harm
        (removes what is not in ``replaced``; installs kernel-side packages unless ``kernel_side``)."""

    @abc.abstractmethod
    def installed_versions(self, names):
        """``{name: version}`` installed now."""

    @abc.abstractmethod
    def install(self, pins):
        """Install ``pins`` in one transaction: ``(rc, stdout, stderr, argv)``."""

    @abc.abstractmethod
    def hold(self, pins, prepared=None):
        """Hold the pinned packages against upgrades; ``{'stdout_lines': ...}`` and what else was done, or FixError."""

    @abc.abstractmethod
    def hold_needed(self, names):
        """What holding the installed packages of ``names`` at their installed versions still needs:
        ``{'add': [...], 'stale': [...]}`` (reads only; installed packages only)."""

    @abc.abstractmethod
    def apply_hold(self, needed):
        """Carry out :meth:`hold_needed`'s answer (new holds first, then the stale ones go), or FixError."""

    def hold_closure(self, roots):
        """The installed packages a hold of ``roots`` must cover too (their NVIDIA requirements), ``{name: version}``."""
        return {}

    def prepare(self, names):
        """Before the install: lift what would block installing ``names`` (returns what :meth:`undo_prepare` puts back)."""
        return None

    def undo_prepare(self, prepared, result):
        """After a failed install: put back what :meth:`prepare` lifted; record it in ``result``."""

    # -- the fix -----------------------------------------------------------------
    def restore(self, previous, now, prepared=None):
        """Put back the versions (and what :meth:`prepare` lifted) that were there before a failed transaction."""
        changed = dict((name, version) for name, version in previous.items() if now.get(name) != version)
        result = {'ok': True, 'restored': []}
        if changed:
            pins = [self.pin(name, version) for name, version in sorted(changed.items())]
            rc, dummy, err, dummy_argv = self.install(pins)
            after = self.installed_versions(changed)
            result.update(restored=pins, rc=rc, stderr=tail(err))
            result['ok'] = rc == 0 and all(after.get(name) == version for name, version in changed.items())
        self.undo_prepare(prepared, result)
        return result

    def apply(self, pins, previous, wanted=None, lift=None, hold=True):
        """Install the pins in one transaction, prove the versions, hold them; restore on failure.

        ``previous`` is ``{name: version}`` of the packages before.  ``wanted`` is ``{name: version or None}`` (None: any
        version) that must be installed afterwards (default: every pin at its version); ``lift`` the names whose locks
        :meth:`prepare` lifts (default: the pinned names).  Returns ``{'installed', 'held', ...}``.
        """
        if wanted is None:
            wanted = dict((self.pin_name(pin), self.pin_version(pin)) for pin in pins)
        prepared = self.prepare(sorted(wanted) if lift is None else lift)
        rc, out, err, argv = self.install(pins)
        now = self.installed_versions(wanted)
        wrong = dict((name, now.get(name)) for name, version in wanted.items() if now.get(name) is None or version and now.get(name) != version)
        if rc != 0 or wrong:
            restored = self.restore(previous, now, prepared)
            raise FixError('%s %s failed (rc=%d)%s: %s. %s'
                           % (self.install_label, ' '.join(pins), rc, '; not at the pinned version: %s' % wrong if wrong else '', tail(err or out),
                              self.restored_note if restored['ok'] else '%s: %s' % (self.restore_failed_note, restored)),
                           'install_failed', pins, argv=argv, rc=rc, stdout=out, stderr=err, restored=restored)
        result = {'installed': pins, 'held': sorted(wanted) if hold else []}
        if hold:
            result.update(self.hold(pins, prepared))
        return result


def checked_plan(tool, backend, plan, pins, replaced, argv, out, new_version, kernel_side=False):
    """The dry-run plan (``{'install': [(name, ...)], 'remove': [(name, ...)]}``) of installing ``pins`` as the fix
    uses it, with ``extra``: the packages it would also install, as ``(name, new_version(entry))``.

    Raises FixError, naming them, when the plan removes packages the fix does not replace or (unless ``kernel_side``)
    installs kernel-side packages.
    """
    removals = [entry[0] for entry in plan['remove'] if entry[0] not in replaced]
    if removals:
        raise FixError('%s would remove %s to install %s; the fix never removes packages it does not replace. Resolve the conflict by hand'
                       % (tool, ', '.join(removals), ' '.join(pins)), 'would_remove', removals, argv=argv, stdout=out)
    kernel = [] if kernel_side else [entry[0] for entry in plan['install'] if KERNEL_SIDE_RE.search(entry[0])]
    if kernel:
        raise FixError('%s would also install or upgrade kernel-side packages (%s) to install %s; the fix never touches the kernel module. '
                       'Install matching user space by hand' % (tool, ', '.join(kernel), ' '.join(pins)), 'kernel_side', kernel,
                       argv=argv, stdout=out)
    wanted = set(backend.pin_name(pin) for pin in pins)
    extra = [(entry[0], new_version(entry)) for entry in plan['install'] if entry[0] not in wanted]
    return {'argv': argv, 'install': plan['install'], 'remove': plan['remove'], 'extra': extra}
