# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The nvidia_driver_match module end to end in-process: arguments, results, check mode, diff, fix paths.

The host's view (``EvidenceReader.gather``) is replaced by recorded corpus evidence, and the
package tools by a table of recorded outputs (tests/fixtures/nvidia_live: real apt-cache and apt-get
output), following community.general's mocked run_command tables.  The real module against real
files and a real ansible-playbook run is in tests/integration/test_nvidia_driver_match_ns.py.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _evidence as ev
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _host as hc
from ansible_collections.llmops.sglang.plugins.modules import nvidia_driver_match

# the options HostCommands gives dnf in check mode (asserted where they matter, left out of the scripted answers' keys)
DRY_RUN_OPTIONS = ('--setopt=cachedir=', '--setopt=system_cachedir=', '--setopt=logdir=', '--disableplugin=generate_')

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures')
CORPUS = os.path.join(FIXTURES, 'nvidia')
LIVE = os.path.join(FIXTURES, 'nvidia_live')


def _read(*parts):
    with open(os.path.join(*parts), encoding='utf-8') as handle:
        return handle.read()


PROC_535_261 = 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Wed Jul 16 20:21:07 UTC 2025\n'
DPKG_535_309 = ('ii \tlibnvidia-ml1:amd64\t535.309.01-0+deb12u1\tamd64\tNVIDIA Management Library (NVML) runtime library\n'
                'ii \tnvidia-smi\t535.309.01-0+deb12u1\tamd64\tNVIDIA System Management Interface\n')
DPKG_535_261 = DPKG_535_309.replace('535.309.01-0+deb12u1', '535.261.03-1').replace('ii \t', 'hi \t')
LXC = {'/run/systemd/container': 'lxc\n'}


class Host:
    """Scripted host: evidence per gather() call and outputs per command."""

    def __init__(self, evidences, commands=None):
        self.evidences = list(evidences)
        self.commands = commands or {}
        self.ran = []

    def gather(self, dummy_self, package_manager='auto'):
        evidence = dict(self.evidences[0])
        if len(self.evidences) > 1:
            self.evidences.pop(0)
        evidence.setdefault('module_loaded', bool(evidence.get('proc_version')))
        return evidence

    def run_command(self, dummy_module, argv, **kwargs):
        self.ran.append(list(argv))
        # check mode's scratch options for dnf (HostCommands) are asserted on host.ran, not part of the scripted answers
        argv = [part for part in argv if not part.startswith(DRY_RUN_OPTIONS)]
        key = ' '.join(os.path.basename(argv[0]) if i == 0 else part for i, part in enumerate(argv))
        for prefix, answer in self.commands.items():
            if key.startswith(prefix):
                if callable(answer):
                    return answer(argv)
                return answer
        raise AssertionError('unexpected command: %s' % key)


@pytest.fixture
def run_module(monkeypatch, capsys):
    def runner(args, host, check_mode=False, diff=False):
        monkeypatch.setattr(ev.EvidenceReader, 'gather', lambda self, pm='auto', smi_table=False: host.gather(self, pm))
        monkeypatch.setattr(hc.HostCommands, 'bin', lambda self, name, path_first=False: '/usr/bin/' + name)

        def fake_run_command(module, argv, **kw):  # a plain function on the class, so the AnsibleModule comes in as `module`
            return host.run_command(module, argv, **kw)

        monkeypatch.setattr('ansible.module_utils.basic.AnsibleModule.run_command', fake_run_command)
        args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        with patch_module_args(args):
            with pytest.raises(SystemExit):
                nvidia_driver_match.main()
        return json.loads(capsys.readouterr().out)
    return runner


def test_match_from_nvml_answer(run_module):
    host = Host([{'nvidia_smi_query': _read(CORPUS, 'query-gpu-driver-version-multi-gpu', 'nvidia-smi-query-gpu.txt'), 'container_files': {}}])
    result = run_module({}, host)
    assert not result.get('failed')
    assert result['changed'] is False
    assert result['match'] is True
    assert result['kernel_module'] == {'version': '515.57', 'flavor': None, 'source': 'nvidia-smi --query-gpu=driver_version', 'file_version': None}
    assert result['userspace']['versions'] == ['515.57']
    assert result['recommended_action'] == 'none'


def test_mismatch_fails_with_what_differs_and_the_fix(run_module):
    case = 'debian-bookworm-smi-525-module-520'
    host = Host([{'proc_version': _read(CORPUS, case, 'proc_driver_nvidia_version.txt'), 'dpkg': _read(CORPUS, case, 'dpkg-query.txt'),
                  'nvidia_smi_query': _read(CORPUS, case, 'nvidia-smi.txt'), 'container_files': LXC}],
                {'apt-cache madison': (0, '', '')})
    result = run_module({}, host)
    assert result['failed'] is True
    assert result['match'] is False
    assert result['in_container'] is True and result['container_kind'] == 'lxc'
    assert result['kernel_module']['flavor'] == 'proprietary'
    assert result['kernel_module']['version'] == '520.56.06' and result['recommended_action'] == 'install_userspace'
    # madison listed nothing: the pure rule still derives the -1 pin.
    assert result['fix_packages'] == ['nvidia-smi=520.56.06-1']
    assert {'component': 'package nvidia-smi', 'version': '525.85.12', 'expected': '520.56.06'} in result['mismatches']
    # The golden message of the drift status: what differs, where it was read, and the fix.
    assert result['msg'] == result['reason'] == (
        'NVIDIA driver drift: kernel module 520.56.06 (from /proc/driver/nvidia/version) but user space has package nvidia-smi '
        '525.85.12; fix=true installs nvidia-smi=520.56.06-1 and holds them')


def test_no_module_is_null_not_failed(run_module):
    result = run_module({}, Host([{'container_files': {}}]))
    assert not result.get('failed')
    assert result['match'] is None
    assert result['recommended_action'] == 'load_module'
    assert result['kernel_module'] == {'version': None, 'flavor': None, 'source': None, 'file_version': None}
    assert result['mismatches'] == [] and result['fix_packages'] == []


def test_no_module_with_expected_version_fails(run_module):
    result = run_module({'expected_version': '570.148.08'}, Host([{'container_files': {}}]))
    assert result['failed'] is True
    assert result['kernel_module']['version'] is None and result['recommended_action'] == 'load_module'
    # The golden message of the no-module status.
    assert result['msg'] == ('expected NVIDIA kernel module 570.148.08, but no NVIDIA kernel module is loaded (/proc/driver/nvidia/version '
                             'and /sys/module/nvidia are absent); load the driver (modprobe nvidia) or install it with the '
                             'llmops.sglang.nvidia_driver role')


@pytest.mark.parametrize('expected, failed', [('565.57.01', False), ('565', False), ('565.57', True), ('570.148.08', True)])
def test_expected_version(run_module, expected, failed):
    proc = _read(CORPUS, 'ubuntu2404-open-565-proc-only', 'proc_driver_nvidia_version.txt')
    result = run_module({'expected_version': expected}, Host([{'proc_version': proc, 'container_files': {}}]))
    assert bool(result.get('failed')) is failed
    assert result['kernel_module']['flavor'] == 'open'


def test_flavor_hint_fills_unknown_and_warns_on_conflict(run_module):
    smi = _read(CORPUS, 'ubuntu2404-role-560-match-new-header', 'nvidia-smi.txt')
    result = run_module({'flavor': 'open'}, Host([{'nvidia_smi_query': smi, 'container_files': {}}]))
    assert result['kernel_module']['flavor'] == 'open'
    proc = _read(CORPUS, 'truenas-module-580-173-nvml-580-178', 'proc_driver_nvidia_version.txt')
    result = run_module({'flavor': 'open'}, Host([{'proc_version': proc, 'container_files': {}}]))
    assert result['kernel_module']['flavor'] == 'proprietary'
    assert any('flavor option says open' in str(warning) for warning in result.get('warnings', [])), result.keys()


def _fix_host(after_dpkg=DPKG_535_261, install=(0, 'Setting up nvidia-smi (535.261.03-1) ...\n', '')):
    madison = _read(LIVE, 'apt-cache-madison.txt')
    simulation = _read(LIVE, 'apt-get-s-install.txt')
    state = {'dpkg': DPKG_535_309}

    def do_install(argv):
        state['dpkg'] = after_dpkg
        return install

    def query(argv):
        return 0, state['dpkg'], ''

    commands = {
        'apt-cache madison': (0, madison, ''),
        'apt-get -s install': (0, simulation, ''),
        'apt-get install': do_install,
        'dpkg-query -W': query,
        'apt-mark hold': (0, 'nvidia-smi set on hold.\nlibnvidia-ml1 set on hold.\n', ''),
    }
    before = {'proc_version': PROC_535_261, 'dpkg': DPKG_535_309, 'container_files': LXC, 'module_loaded': True}
    after = dict(before, dpkg=after_dpkg)
    return Host([before, after], commands), state


def test_fix_check_mode_reports_change_and_diff_without_installing(run_module):
    host, state = _fix_host()
    result = run_module({'fix': True}, host, check_mode=True, diff=True)
    assert not result.get('failed')
    assert result['changed'] is True
    assert result['fix_packages'] == ['libnvidia-ml1=535.261.03-1', 'nvidia-smi=535.261.03-1']
    assert 'kernel module: 535.261.03' in result['diff']['before']
    assert 'user space: 535.309.01' in result['diff']['before']
    assert 'package nvidia-smi 535.261.03-1' in result['diff']['after']
    assert 'user space: 535.261.03' in result['diff']['after']
    ran = [' '.join(argv[:3]) for argv in host.ran]
    assert '/usr/bin/apt-get -s install' in ran
    # apt's planner log (/var/log/apt/eipp.log.xz) off: the dry run writes nothing on the host
    simulated = [argv for argv in host.ran if argv[:3] == ['/usr/bin/apt-get', '-s', 'install']]
    assert simulated and all(argv[3:5] == ['-o', 'Dir::Log::Planner='] for argv in simulated), simulated
    assert not any(argv[1] == 'install' for argv in host.ran if argv[0].endswith('apt-get'))
    assert state['dpkg'] == DPKG_535_309


def test_fix_check_mode_without_fix_option_is_not_a_change(run_module):
    host, dummy = _fix_host()
    result = run_module({}, host, check_mode=True)
    assert result['failed'] is True and result['changed'] is False


def test_fix_installs_pins_holds_and_verifies(run_module):
    host, state = _fix_host()
    result = run_module({'fix': True}, host)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True
    assert result['match'] is True
    assert result['fix_result']['held'] == ['libnvidia-ml1', 'nvidia-smi']
    assert result['recommended_action'] == 'none'
    install = next(argv for argv in host.ran if argv[0].endswith('apt-get') and argv[1] == 'install')
    assert install[-2:] == ['libnvidia-ml1=535.261.03-1', 'nvidia-smi=535.261.03-1']
    assert '--no-install-recommends' in install
    assert ['/usr/bin/apt-mark', 'hold', 'libnvidia-ml1', 'nvidia-smi'] in host.ran


def test_fix_second_run_changes_nothing(run_module):
    host = Host([{'proc_version': PROC_535_261, 'dpkg': DPKG_535_261, 'container_files': LXC, 'module_loaded': True}])
    result = run_module({'fix': True}, host)
    assert result['changed'] is False and result['match'] is True
    assert not any(argv[0].endswith('apt-get') for argv in host.ran)


def test_failed_install_restores_previous_packages(run_module):
    host, state = _fix_host(after_dpkg=DPKG_535_309.replace('nvidia-smi\t535.309.01-0+deb12u1', 'nvidia-smi\t535.261.03-1'),
                            install=(100, '', 'E: Sub-process /usr/bin/dpkg returned an error code (1)\n'))
    restore_calls = []
    original = host.commands['apt-get install']

    def install(argv):
        if any(arg.startswith('nvidia-smi=535.309') for arg in argv):
            restore_calls.append(argv)
            state['dpkg'] = DPKG_535_309
            return 0, '', ''
        return original(argv)

    host.commands['apt-get install'] = install
    result = run_module({'fix': True}, host)
    assert result['failed'] is True
    assert result['fix_error'] == {'kind': 'install_failed', 'packages': ['libnvidia-ml1=535.261.03-1', 'nvidia-smi=535.261.03-1']}
    assert result['rc'] == 100
    assert result['restored']['ok'] is True
    assert result['restored']['restored'] == ['nvidia-smi=535.309.01-0+deb12u1']
    assert restore_calls
    assert not any(argv[0].endswith('apt-mark') for argv in host.ran)


def test_fix_refuses_removals_it_does_not_replace(run_module):
    host, state = _fix_host()
    host.commands['apt-get -s install'] = (0, 'Remv xserver-xorg-video-nouveau [1:1.0.17-2]\n'
                                              'Inst nvidia-smi [535.309.01-0+deb12u1] (535.261.03-1 Debian:12.15/oldstable [amd64])\n', '')
    result = run_module({'fix': True}, host)
    assert result['failed'] is True
    assert result['fix_error'] == {'kind': 'would_remove', 'packages': ['xserver-xorg-video-nouveau']}
    assert result['changed'] is False
    assert not any(argv[0].endswith('apt-get') and argv[1] == 'install' for argv in host.ran)


def test_fix_refuses_kernel_side_packages(run_module):
    host, state = _fix_host()
    host.commands['apt-get -s install'] = (0, 'Inst nvidia-kernel-dkms (535.261.03-1 Debian:12.15/oldstable [amd64])\n', '')
    result = run_module({'fix': True}, host)
    assert result['failed'] is True
    assert result['fix_error'] == {'kind': 'kernel_side', 'packages': ['nvidia-kernel-dkms']}
    assert not any(argv[0].endswith('apt-get') and argv[1] == 'install' for argv in host.ran)


def test_bare_host_with_newer_module_file_says_reboot(run_module):
    host, state = _fix_host()
    host.evidences = [dict(host.evidences[0], container_files={}, modinfo='version:        535.309.01\nlicense:        NVIDIA\n')]
    result = run_module({'fix': True}, host)
    assert result['failed'] is True
    assert result['recommended_action'] == 'reboot'
    assert result['kernel_module']['file_version'] == '535.309.01' and result['kernel_module']['version'] == '535.261.03'
    assert 'fix_error' not in result and 'fix_result' not in result
    assert not any(argv[0].endswith('apt-get') for argv in host.ran)


def test_fix_with_dnf_installs_and_locks(run_module):
    # rpm --qf rows of negativo17-style packages (corpus rhel8-negativo17-570-nvml-only), module 570.86.15 loaded
    rpm = ''.join('%s\t3\t570.86.16\t1.el8\tx86_64\t\n' % name for name in ('nvidia-driver', 'nvidia-driver-cuda-libs', 'libnvidia-ml'))
    rpm_after = rpm.replace('570.86.16', '570.86.15')
    # dnf list --showduplicates rows (format per https://dnf.readthedocs.io/en/latest/command_ref.html#list-command)
    listing = ''.join('%s.x86_64    3:%s-1.el8    cuda-rhel8-x86_64\n' % (name, version)
                      for name in ('libnvidia-ml', 'nvidia-driver', 'nvidia-driver-cuda-libs') for version in ('570.86.16', '570.86.15'))
    proc = 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16-I3-C10-1-1)\n'
    before = {'proc_version': proc, 'rpm': rpm, 'container_files': LXC, 'module_loaded': True,
              'os_release': 'ID="rocky"\nID_LIKE="rhel centos fedora"\n'}
    table = ('Dependencies resolved.\n' + '=' * 80 + '\n Package   Arch   Version   Repository   Size\n' + '=' * 80 + '\nDowngrading:\n'
             + ''.join(' %s   x86_64   3:570.86.15-1.el8   cuda-rhel8-x86_64   1.0 M\n' % name
                       for name in ('libnvidia-ml', 'nvidia-driver', 'nvidia-driver-cuda-libs'))
             + '\nTransaction Summary\n' + '=' * 80 + '\nDowngrade  3 Packages\n')
    host = Host([before, dict(before, rpm=rpm_after)], {
        'dnf -q list --showduplicates': (0, listing, ''),
        'dnf --assumeno --disableplugin=versionlock --setopt=install_weak_deps=False install': (1, table, 'Operation aborted.\n'),
        'dnf -q versionlock list': (0, '', ''),
        'dnf -y --setopt=install_weak_deps=False install': (0, 'Complete!\n', ''),
        'rpm -q --qf': (0, rpm_after, ''),
        'dnf -q versionlock add': (0, 'Adding versionlock on: nvidia-driver-3:570.86.15-1.el8.*\n', ''),
    })
    result = run_module({'fix': True}, host)
    assert not result.get('failed'), result.get('msg')
    assert result['distro_family'] == 'redhat'
    pins = ['libnvidia-ml-570.86.15-1.el8', 'nvidia-driver-570.86.15-1.el8', 'nvidia-driver-cuda-libs-570.86.15-1.el8']
    assert sorted(result['fix_packages']) == pins
    install = next(argv for argv in host.ran if 'install' in argv)
    assert sorted(install[install.index('install') + 1:]) == pins
    lock = next(argv for argv in host.ran if 'versionlock' in argv and 'add' in argv)
    assert sorted(lock[lock.index('add') + 1:]) == pins
    assert result['match'] is True and result['changed'] is True


# ---------------------------------------------------------------------------
# dnf with the real outputs recorded on a test host (tests/fixtures/nvidia_live/dnf-*.txt)
# ---------------------------------------------------------------------------

DNF_NAMES = ('nvidia-driver-NVML', 'nvidia-driver-cuda', 'nvidia-driver-cuda-libs', 'nvidia-driver-libs')


def _rpm_rows(version):
    return ''.join('%s\t3\t%s\t1.el9\tx86_64\tStand-in\n' % (name, version) for name in DNF_NAMES + ('nvidia-persistenced',))


def _dnf_host(extra_commands=None):
    """Installed and locked at 535.261.03, module 535.309.01 (the state the recordings were taken in)."""
    proc = PROC_535_261.replace('535.261.03', '535.309.01')
    before = {'proc_version': proc, 'rpm': _rpm_rows('535.261.03'), 'container_files': {'/run/systemd/container': 'systemd-nspawn\n'},
              'module_loaded': True, 'os_release': 'ID=debian\n'}
    commands = {
        'dnf -q list --showduplicates': (0, _read(LIVE, 'dnf-list-showduplicates.txt'), ''),
        'dnf --assumeno': (1, _read(LIVE, 'dnf-assumeno-install.txt'), 'Operation aborted.\n'),
        'dnf -q versionlock list': (0, _read(LIVE, 'dnf-versionlock-list.txt'), ''),
    }
    commands.update(extra_commands or {})
    return Host([before, dict(before, rpm=_rpm_rows('535.309.01'))], commands)


def test_dnf_check_mode_diff_shows_the_pinned_versions(run_module):
    host = _dnf_host()
    result = run_module({'fix': True, 'package_manager': 'dnf'}, host, check_mode=True, diff=True)
    assert result['changed'] is True and not result.get('failed')
    assert sorted(result['fix_packages']) == sorted('%s-535.309.01-1.el9' % name for name in DNF_NAMES)
    # The "after" side names the version-release the fix installs, not the installed one.
    assert 'package nvidia-driver-NVML 535.309.01-1.el9' in result['diff']['after']
    assert 'package nvidia-driver-NVML 535.261.03-1.el9' in result['diff']['before']
    assert any('--assumeno' in argv for argv in host.ran)
    assert not any('-y' in argv for argv in host.ran)
    # --check writes nothing of the host's: every dnf query keeps its metadata cache and its logs in the module's own
    # temporary directory (removed with it), not in /var/cache/dnf and /var/log
    dnf_runs = [argv for argv in host.ran if os.path.basename(argv[0]) == 'dnf']
    assert dnf_runs
    for argv in dnf_runs:
        cache = [part.split('=', 2)[2] for part in argv if part.startswith(('--setopt=cachedir=', '--setopt=system_cachedir='))]
        logs = [part.split('=', 2)[2] for part in argv if part.startswith('--setopt=logdir=')]
        assert len(cache) == 2 and len(set(cache)) == 1 and len(logs) == 1, argv
        assert cache[0] == os.path.join(logs[0], 'cache') and os.path.basename(logs[0]) == 'dnf', argv
        assert not logs[0].startswith(('/var/', '/root/')), argv
        # dnf's shell-completion plugin writes /var/cache/dnf/packages.db on every run, whatever the cache directory
        assert '--disableplugin=generate_completion_cache' in argv, argv


def test_dry_run_dnf_argv_moves_only_dnfs_cache_and_logs():
    argv = ['/usr/bin/dnf', '-q', 'list', '--showduplicates', 'nvidia-driver']
    assert hc.dry_run_dnf_argv(argv, '/tmp/x/dnf') == [
        '/usr/bin/dnf', '--setopt=cachedir=/tmp/x/dnf/cache', '--setopt=system_cachedir=/tmp/x/dnf/cache', '--setopt=logdir=/tmp/x/dnf',
        '--disableplugin=generate_completion_cache'] + argv[1:]
    assert hc.dry_run_dnf_argv(['/usr/bin/rpm', '-qa'], '/tmp/x/dnf') == ['/usr/bin/rpm', '-qa']


def test_dnf_fix_lifts_the_locks_and_relocks(run_module):
    lifted = []
    host = _dnf_host({
        'dnf -q versionlock delete': lambda argv: (lifted.extend(argv[4:]), (0, '', ''))[1],
        'dnf -y --setopt=install_weak_deps=False install': (0, 'Complete!\n', ''),
        'rpm -q --qf': (0, _rpm_rows('535.309.01'), ''),
        'dnf -q versionlock add': (0, '', ''),
    })
    result = run_module({'fix': True, 'package_manager': 'dnf'}, host)
    assert not result.get('failed'), result.get('msg')
    # outside check mode dnf keeps its own cache and logs (the install reuses the metadata its dry run fetched)
    assert not any(part.startswith('--setopt=cachedir=') for argv in host.ran for part in argv)
    assert sorted(lifted) == sorted('%s-3:535.261.03-1.el9.*' % name for name in DNF_NAMES)
    assert sorted(result['fix_result']['held']) == sorted(DNF_NAMES)


def test_dnf_failed_install_restores_packages_and_locks(run_module):
    added = []
    host = _dnf_host({
        'dnf -q versionlock delete': (0, '', ''),
        'dnf -y --setopt=install_weak_deps=False install': (1, '', 'Error: Error downloading packages:\n  Status code: 404\n'),
        'rpm -q --qf': (0, _rpm_rows('535.261.03'), ''),
        'dnf -q versionlock add': lambda argv: (added.extend(argv[4:]), (0, '', ''))[1],
    })
    result = run_module({'fix': True, 'package_manager': 'dnf'}, host)
    assert result['failed'] is True
    pins = sorted('%s-535.309.01-1.el9' % name for name in DNF_NAMES)
    assert result['fix_error'] == {'kind': 'install_failed', 'packages': pins}
    # The golden message of a failed install: the verdict, the command, what it printed, and that nothing is lost.
    assert result['msg'] == (
        'NVIDIA driver drift: kernel module 535.309.01 (from /proc/driver/nvidia/version) but user space has %s; fix=true installs %s and '
        "holds them. dnf install %s failed (rc=1); not at the pinned version: %s: Error: Error downloading packages:\n  Status code: 404. "
        'The previous packages and version locks are in place.'
        % (', '.join('package %s 535.261.03' % name for name in DNF_NAMES), ' '.join(pins), ' '.join(pins),
           dict((name, '535.261.03-1.el9') for name in DNF_NAMES)))
    assert sorted(added) == sorted('%s-3:535.261.03-1.el9.*' % name for name in DNF_NAMES)
    assert result['restored']['ok'] is True and result['restored']['restored'] == []


def test_dnf_fix_refuses_a_transaction_that_removes_or_touches_the_kernel_side(run_module):
    # dnf 4's table layout (dnf/cli/output.py list_transaction): a removal and a kmod package ride along
    table = _read(LIVE, 'dnf-assumeno-install.txt').replace(
        '\nTransaction Summary', 'Installing dependencies:\n kmod-nvidia-latest-dkms  x86_64  3:535.309.01-1.el9  cuda  40 M\n'
        'Removing:\n xorg-x11-drv-nouveau  x86_64  1:1.0.17-2.el9  @appstream  380 k\n\nTransaction Summary')
    host = _dnf_host({'dnf --assumeno': (1, table, '')})
    result = run_module({'fix': True, 'package_manager': 'dnf'}, host, check_mode=True)
    assert result['failed'] is True
    assert result['fix_error'] == {'kind': 'would_remove', 'packages': ['xorg-x11-drv-nouveau']}
    assert not any('-y' in argv for argv in host.ran)


# ---------------------------------------------------------------------------
# install_packages: the nvidia_driver role's install through the same backends
# ---------------------------------------------------------------------------

CUDA_NAMES = ('cuda-drivers-535', 'nvidia-driver-cuda', 'nvidia-kernel-dkms', 'libcuda1', 'libnvidia-ml1', 'nvidia-smi')
# apt-cache madison rows in the format of tests/fixtures/nvidia_live/apt-cache-madison.txt (the stand-in repository of
# tests/integration/test_nvidia_role_apt.py serves these names and versions)
MADISON_CUDA = ''.join('%s | %s | http://10.0.0.1:8080 ./ Packages\n' % (name, version)
                       for name in CUDA_NAMES for version in ('535.309.01-0+deb12u1', '535.261.03-1')
                       if not (name == 'cuda-drivers-535' and version.startswith('535.309')))
SIM_CUDA = ''.join('Inst %s (535.261.03-1 localhost [amd64])\n' % name for name in CUDA_NAMES)


def _dpkg_rows(names, version='535.261.03-1', status='ii'):
    return ''.join('%s \t%s\t%s\tamd64\tstand-in\n' % (status, name, version) for name in names)


def _install_host(held=''):
    """A Debian host without NVIDIA packages; the install puts CUDA_NAMES in at 535.261.03-1."""
    state = {'dpkg': '', 'held': held, 'holds': []}

    def do_install(argv):
        state['dpkg'] = _dpkg_rows(CUDA_NAMES)
        return 0, 'Setting up cuda-drivers-535 (535.261.03-1) ...\n', ''

    def hold(argv):
        state['holds'].append(argv[2:])
        state['held'] += ''.join(name + '\n' for name in argv[2:])
        return 0, '', ''

    commands = {
        # dpkg-query -W -f FORMAT NAME...: the rows of the names asked for
        'dpkg-query -W': lambda argv: (0, ''.join(row for row in state['dpkg'].splitlines(True) if row.split('\t')[1] in argv[4:]), ''),
        'apt-cache madison': (0, MADISON_CUDA, ''),
        'apt-get -s install': (0, SIM_CUDA, ''),
        'apt-get install': do_install,
        'apt-mark showhold': lambda argv: (0, state['held'], ''),
        'apt-mark hold': hold,
    }
    before = {'container_files': {}, 'module_loaded': False}
    after = dict(before, dpkg=_dpkg_rows(CUDA_NAMES), modinfo='version:        535.261.03\nlicense:        NVIDIA\n')
    return Host([before, after], commands), state


INSTALL_ARGS = {'install_packages': ['cuda-drivers-535'], 'install_version': '535.261.03', 'kernel_side': True, 'package_manager': 'apt'}


def test_install_pins_the_exact_version_and_holds_named_and_user_space(run_module):
    host, state = _install_host()
    result = run_module(INSTALL_ARGS, host)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True
    # The newest revision of 535.261.03 the repository offers, not the newer 535.309.01 upload.
    assert result['fix_packages'] == ['cuda-drivers-535=535.261.03-1']
    install = next(argv for argv in host.ran if argv[0].endswith('apt-get') and argv[1] == 'install')
    assert install[-1] == 'cuda-drivers-535=535.261.03-1' and '--no-install-recommends' in install
    # Held: the named package and every user-space package nvidia_driver_info counts; not the kernel side itself.
    assert result['fix_result']['held'] == ['cuda-drivers-535', 'libcuda1', 'libnvidia-ml1', 'nvidia-driver-cuda', 'nvidia-smi']
    assert state['holds'] == [result['fix_result']['held']]
    assert result['fix_result']['hold_added'] == result['fix_result']['held']
    # The result describes the host after the install: the module file on disk, none loaded (a reboot decides).
    assert result['kernel_module']['version'] is None and result['kernel_module']['file_version'] == '535.261.03'


def test_install_second_run_changes_nothing(run_module):
    host, state = _install_host()
    state['dpkg'] = _dpkg_rows(CUDA_NAMES, status='hi')
    state['held'] = ''.join(name + '\n' for name in CUDA_NAMES)
    host.evidences = [dict(host.evidences[1])]
    result = run_module(INSTALL_ARGS, host)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is False and result['fix_packages'] == []
    assert not any(argv[0].endswith('apt-get') for argv in host.ran)
    assert not any(argv[0].endswith('apt-mark') and argv[1] == 'hold' for argv in host.ran)


def test_install_holds_again_what_someone_released(run_module):
    host, state = _install_host()
    state['dpkg'] = _dpkg_rows(CUDA_NAMES)
    state['held'] = ''.join(name + '\n' for name in CUDA_NAMES if name != 'nvidia-smi')
    host.evidences = [dict(host.evidences[1])]
    result = run_module(INSTALL_ARGS, host)
    assert result['changed'] is True and result['fix_packages'] == []
    assert state['holds'] == [['nvidia-smi']]


def test_install_check_mode_and_diff_change_nothing(run_module):
    host, state = _install_host()
    result = run_module(INSTALL_ARGS, host, check_mode=True, diff=True)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True and result['fix_packages'] == ['cuda-drivers-535=535.261.03-1']
    assert result['diff']['before'] == 'package cuda-drivers-535 not installed\nheld: none\n'
    assert result['diff']['after'].startswith('package cuda-drivers-535 535.261.03-1\nheld: cuda-drivers-535')
    assert not any(argv[1] in ('install', 'hold') for argv in host.ran if argv[0].endswith(('apt-get', 'apt-mark')))
    assert state['dpkg'] == ''


def test_install_version_the_repositories_lack_fails_naming_what_they_offer(run_module):
    host, state = _install_host()
    result = run_module(dict(INSTALL_ARGS, install_version='535.247.01'), host)
    assert result['failed'] is True
    assert result['fix_error'] == {'kind': 'plan_failed', 'packages': ['cuda-drivers-535']}
    reason = 'no version 535.247.01 of cuda-drivers-535 is available from the configured repositories (they offer: 535.261.03-1)'
    assert result['fix_skipped'] == [{'name': 'cuda-drivers-535', 'reason': reason}]
    assert not any(argv[0].endswith('apt-get') for argv in host.ran)


def test_install_refuses_kernel_side_unless_allowed(run_module):
    host, state = _install_host()
    host.commands['apt-get -s install'] = (0, SIM_CUDA.replace('Inst libcuda1', 'Inst nvidia-kernel-dkms-extra'), '')
    result = run_module(dict(INSTALL_ARGS, kernel_side=False), host)
    assert result['failed'] is True
    assert result['fix_error'] == {'kind': 'kernel_side', 'packages': ['nvidia-kernel-dkms', 'nvidia-kernel-dkms-extra']}
    assert state['dpkg'] == ''


def test_install_refuses_a_removal(run_module):
    host, state = _install_host()
    host.commands['apt-get -s install'] = (0, 'Remv nvidia-kernel-open-dkms [535.261.03-1]\n' + SIM_CUDA, '')
    result = run_module(INSTALL_ARGS, host)
    assert result['failed'] is True
    assert result['fix_error'] == {'kind': 'would_remove', 'packages': ['nvidia-kernel-open-dkms']}
    assert state['dpkg'] == '' and state['holds'] == []


def test_install_without_a_version_leaves_installed_packages_alone(run_module):
    host, state = _install_host()
    state['dpkg'] = _dpkg_rows(['cuda-drivers-535'], version='535.216.01-1')
    result = run_module(dict(INSTALL_ARGS, install_version='', hold=False), host)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is False and result['fix_packages'] == []
    assert not any(argv[0].endswith(('apt-get', 'apt-mark')) for argv in host.ran)


def test_install_and_fix_are_exclusive(run_module):
    result = run_module(dict(INSTALL_ARGS, fix=True), Host([{'container_files': {}}]))
    assert result['failed'] is True and 'mutually exclusive' in result['msg']


def test_install_dnf_module_stream_locks_the_kernel_side_and_drops_stale_locks(run_module):
    """A module spec at the branch (the role below R590): the dry run decides, the lock covers what it requires."""
    rpm_rows = _rpm_rows('535.261.03').replace('1.el9', '1.el8')
    closure = 'nvidia-driver\t535.261.03-1.el8\nkmod-nvidia-latest-dkms\t535.261.03-1.el8\n'
    state = {'locks': 'nvidia-driver-3:535.216.01-1.el8.*\n', 'ran': []}

    def lock(argv):
        state['ran'].append(argv[3:])
        return 0, '', ''

    table = ('Dependencies resolved.\n' + '=' * 80 + '\n Package   Arch   Version   Repository   Size\n' + '=' * 80 + '\nInstalling group/module packages:\n'
             + ' nvidia-driver   x86_64   3:535.261.03-1.el8   cuda   1.0 M\n\nTransaction Summary\n')
    host = Host([{'container_files': {}, 'module_loaded': False, 'rpm': '', 'os_release': 'ID="rocky"\nID_LIKE="rhel centos fedora"\n'},
                 {'container_files': {}, 'module_loaded': False, 'rpm': rpm_rows, 'os_release': 'ID="rocky"\n'}], {
        'rpm -q --qf %{NAME}\\t%{VERSION}-%{RELEASE}\\n': (0, closure, ''),
        'rpm -q --requires': (0, '', ''),
        'rpm -q --qf': (0, rpm_rows, ''),
        'dnf --assumeno': (1, table, 'Operation aborted.\n'),
        'dnf -q versionlock list': lambda argv: (0, state['locks'], ''),
        'dnf -q versionlock delete': lock,
        'dnf -q versionlock add': lock,
        'dnf -y --setopt=install_weak_deps=False install': (0, 'Complete!\n', ''),
    })
    result = run_module({'install_packages': ['@nvidia-driver:535-dkms'], 'kernel_side': True, 'package_manager': 'dnf'}, host)
    assert not result.get('failed'), result.get('msg')
    assert result['fix_packages'] == ['@nvidia-driver:535-dkms']
    held = result['fix_result']['held']
    assert 'nvidia-driver' in held and 'kmod-nvidia-latest-dkms' in held and 'nvidia-driver-NVML' in held
    # The earlier run's lock on nvidia-driver was lifted for the transaction; the new locks come before the stale ones go.
    assert state['ran'][0][0] == 'delete' and state['ran'][0][1:] == ['nvidia-driver-3:535.216.01-1.el8.*']
    assert state['ran'][1][0] == 'add'
