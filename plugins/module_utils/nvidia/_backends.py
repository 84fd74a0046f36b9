# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The apt and dnf implementations of :class:`nvidia._fix.PackageBackend`, and :func:`backend_for` to pick one.

Private module_utils of llmops.sglang.nvidia_driver_match.
"""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._fix import FixError, PackageBackend, checked_plan, tail
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._packages import (
    dpkg_versions,
    parse_apt_madison,
    parse_apt_simulation,
    parse_dnf_list,
    parse_dnf_transaction,
    pin_name,
    pin_version,
    read_versionlocks,
    rpm_requires_closure,
    rpm_versions,
    stale_locks,
    versionlock_name,
)

# Added to the runner's C locale: no debconf questions, no needrestart prompt.
APT_ENV = {'DEBIAN_FRONTEND': 'noninteractive', 'NEEDRESTART_MODE': 'l'}
APT_INSTALL_OPTIONS = ['-y', '--no-install-recommends', '--allow-downgrades', '--allow-change-held-packages',
                       '-o', 'Dpkg::Options::=--force-confdef', '-o', 'Dpkg::Options::=--force-confold']
# apt-get -s still writes the plan it simulates to /var/log/apt/eipp.log.xz (apt's planner log, Dir::Log::Planner);
# an empty file name turns that log off, so the dry run (check mode) writes nothing on the host.
APT_SIMULATE_OPTIONS = ['-o', 'Dir::Log::Planner=']
# dnf/yum install options the fix uses: no weak dependencies (the driver's Recommends pull in X.org and more).
DNF_INSTALL_OPTIONS = ['--setopt=install_weak_deps=False']


class AptBackend(PackageBackend):
    """apt-get, apt-cache and apt-mark; dpkg's database."""

    name = 'apt'
    database = 'dpkg'
    install_label = 'apt-get install'
    restored_note = 'The previous packages are in place.'
    restore_failed_note = 'Restoring the previous packages failed'

    def pin(self, name, version):
        return '%s=%s' % (name, version)

    def pin_name(self, pin):
        return pin_name(pin, 'apt')

    def pin_version(self, pin):
        return pin_version(pin, 'apt')

    def available_versions(self, names):
        tool = self.host.bin('apt-cache')
        if not tool:
            return None
        rc, out, dummy = self.host.run([tool, 'madison'] + sorted(set(names)))
        # Nothing listed at all (no apt-get update in a fresh container): unknown, not "none available".
        return parse_apt_madison(out) or None if rc == 0 else None

    def simulate(self, pins, replaced, kernel_side=False):
        apt_get = self.host.bin('apt-get')
        if not apt_get:
            raise FixError('apt-get was not found on the host; install matching user-space packages by hand: %s' % ' '.join(pins), 'no_tool', pins)
        argv = [apt_get, '-s', 'install'] + APT_SIMULATE_OPTIONS + APT_INSTALL_OPTIONS + list(pins)
        rc, out, err = self.host.run(argv, env=APT_ENV)
        if rc != 0:
            raise FixError('apt-get could not plan the install of %s (rc=%d): %s; check that the repository that provides these '
                           'exact versions is configured and apt-get update has run' % (' '.join(pins), rc, tail(err or out)),
                           'plan_failed', pins, argv=argv, rc=rc, stdout=out, stderr=err)
        # apt's plan lists (name, old version, new version)
        return checked_plan('apt-get', self, parse_apt_simulation(out), pins, replaced, argv, out, lambda entry: entry[2], kernel_side)

    def installed_versions(self, names):
        return dpkg_versions(self.host, names)

    def install(self, pins):
        argv = [self.host.bin('apt-get'), 'install'] + APT_INSTALL_OPTIONS + list(pins)
        rc, out, err = self.host.run(argv, env=APT_ENV)
        return rc, out, err, argv

    def hold(self, pins, prepared=None):
        names = sorted(set(self.pin_name(pin) for pin in pins))
        argv = [self.host.bin('apt-mark'), 'hold'] + names
        rc, out, err = self.host.run(argv, env=APT_ENV)
        if rc != 0:
            raise FixError('installed %s but apt-mark hold failed (rc=%d): %s; hold the packages by hand' % (' '.join(pins), rc, tail(err)),
                           'hold_failed', names, argv=argv, rc=rc, stdout=out, stderr=err)
        return {'stdout_lines': out.splitlines()[-20:]}

    def hold_needed(self, names):
        installed = self.installed_versions(names)
        rc, out, dummy = self.host.run([self.host.bin('apt-mark'), 'showhold'], env=APT_ENV)
        held = set(line.strip().split(':', 1)[0] for line in (out or '').splitlines()) if rc == 0 else set()
        return {'add': sorted(name for name in installed if name not in held), 'stale': []}

    def apply_hold(self, needed):
        if needed['add']:
            self.hold(needed['add'])
        return {'hold_added': needed['add'], 'unlocked': []}


class DnfBackend(PackageBackend):
    """dnf (or yum) with the versionlock plugin; rpm's database.

    Version locks of an earlier fix hide every other version of the locked packages: :meth:`prepare` lifts the
    locks on the packages the fix replaces, :meth:`hold` locks the new versions, a failed install puts the
    lifted locks back.
    """

    name = 'dnf'
    database = 'rpm'
    install_label = 'dnf install'
    restored_note = 'The previous packages and version locks are in place.'
    restore_failed_note = 'Restoring the previous packages and locks failed'

    def pin(self, name, version):
        return '%s-%s' % (name, version)

    def pin_name(self, pin):
        return pin_name(pin, 'dnf')

    def pin_version(self, pin):
        return pin_version(pin, 'dnf')

    def _dnf(self, pins=()):
        dnf = self.host.bin('dnf') or self.host.bin('yum')
        if not dnf:
            raise FixError('dnf was not found on the host; install matching user-space packages by hand: %s' % ' '.join(pins), 'no_tool', pins)
        return dnf

    def available_versions(self, names):
        tool = self.host.bin('dnf')
        if not tool:
            return None
        rc, out, dummy = self.host.run([tool, '-q', 'list', '--showduplicates'] + sorted(set(names)))
        return parse_dnf_list(out) or None

    def simulate(self, pins, replaced, kernel_side=False):
        """Version locks are left out of the dry run (``--disableplugin=versionlock``): the fix lifts the locks of
        the packages it replaces before it installs."""
        argv = [self._dnf(pins), '--assumeno', '--disableplugin=versionlock'] + DNF_INSTALL_OPTIONS + ['install'] + list(pins)
        rc, out, err = self.host.run(argv)
        plan = parse_dnf_transaction(out)
        if not plan['resolved'] and 'Nothing to do' not in (out or '') + (err or ''):
            raise FixError('dnf could not plan the install of %s (rc=%d): %s; check that the repository that provides these exact '
                           'versions is configured and enabled' % (' '.join(pins), rc, tail(err or out)),
                           'plan_failed', pins, argv=argv, rc=rc, stdout=out, stderr=err)
        # dnf's plan lists (name, new epoch:version-release, section title)
        return checked_plan('dnf', self, plan, pins, replaced, argv, out, lambda entry: entry[1], kernel_side)

    def installed_versions(self, names):
        return rpm_versions(self.host, names)

    def locks(self, names):
        """The versionlock entries on NAMES, or None when the versionlock plugin is not there."""
        self._dnf()
        entries = read_versionlocks(self.host)
        if entries is None:
            return None
        wanted = set(names)
        return [entry for entry in entries if versionlock_name(entry) in wanted]

    def prepare(self, names):
        if not names:
            return []
        locks = self.locks(names)
        if locks is None:
            raise FixError('the dnf versionlock plugin is not available (dnf versionlock list failed), so the fix could not hold %s; install '
                           'python3-dnf-plugin-versionlock (yum-plugin-versionlock on EL7) and run again' % ' '.join(names), 'no_versionlock', names)
        if locks:
            argv = [self._dnf(), '-q', 'versionlock', 'delete'] + sorted(set(locks))
            rc, out, err = self.host.run(argv)
            if rc != 0:
                raise FixError('dnf versionlock delete failed (rc=%d): %s; nothing was installed' % (rc, tail(err or out)),
                               'unlock_failed', locks, argv=argv, rc=rc, stdout=out, stderr=err)
        return locks

    def undo_prepare(self, prepared, result):
        locks = list(prepared or [])
        result['locks'] = locks
        if not locks:
            return
        rc, dummy, err = self.host.run([self._dnf(), '-q', 'versionlock', 'add'] + locks)
        back = self.locks([versionlock_name(entry) for entry in locks]) or []
        missing = [entry for entry in locks if entry not in back]
        if rc != 0 or missing:
            result.update(ok=False, locks_missing=missing, lock_rc=rc, lock_stderr=tail(err))

    def install(self, pins):
        argv = [self._dnf(pins), '-y'] + DNF_INSTALL_OPTIONS + ['install'] + list(pins)
        rc, out, err = self.host.run(argv)
        return rc, out, err, argv

    def hold(self, pins, prepared=None):
        argv = [self._dnf(pins), '-q', 'versionlock', 'add'] + list(pins)
        rc, out, err = self.host.run(argv)
        if rc != 0:
            raise FixError('installed %s but dnf versionlock add failed (rc=%d): %s; lock the packages by hand'
                           % (' '.join(pins), rc, tail(err or out)), 'hold_failed', pins, argv=argv, rc=rc, stdout=out, stderr=err)
        return {'unlocked': list(prepared or []), 'stdout_lines': (out or '').splitlines()[-20:]}

    def hold_needed(self, names):
        """Locks at the installed versions that are missing, and the locks on these packages at other versions."""
        installed = self.installed_versions(names)
        entries = read_versionlocks(self.host) or []
        mine = [entry for entry in entries if versionlock_name(entry) in installed]
        stale = stale_locks(mine, installed)
        locked = set(versionlock_name(entry) for entry in mine if entry not in stale)
        return {'add': [self.pin(name, version) for name, version in sorted(installed.items()) if name not in locked], 'stale': stale}

    def apply_hold(self, needed):
        if needed['add']:
            self.hold(needed['add'])
        if needed['stale']:
            # after the new locks are in place, so the packages are never unlocked
            argv = [self._dnf(), '-q', 'versionlock', 'delete'] + needed['stale']
            rc, out, err = self.host.run(argv)
            if rc != 0:
                raise FixError('dnf versionlock delete of the locks at other versions failed (rc=%d): %s; the new locks are in place, '
                               'delete these by hand: %s' % (rc, tail(err or out), ' '.join(needed['stale'])), 'unlock_failed',
                               needed['stale'], argv=argv, rc=rc, stdout=out, stderr=err)
        return {'hold_added': needed['add'], 'unlocked': needed['stale']}

    def hold_closure(self, roots):
        """The kernel side (kmod packages, nvidia-kmod-common, the main nvidia-driver package) reached from ``roots``:
        unlocked, a ``dnf upgrade`` would move the kernel module away from the locked user space."""
        return rpm_requires_closure(self.host, roots)


BACKENDS = dict((backend.name, backend) for backend in (AptBackend, DnfBackend))


def backend_for(manager, host):
    """The :class:`PackageBackend` of ``manager`` (apt or dnf), ``None`` for a host no fix backend serves."""
    backend = BACKENDS.get(manager)
    return backend(host) if backend else None
