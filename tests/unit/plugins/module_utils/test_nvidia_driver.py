# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parsers and evaluate() of _nvidia_driver over the recorded NVIDIA corpus and real formats.

tests/fixtures/nvidia/ is a byte-exact copy of the shared corpus (every case cites its public
source in expected.json).  Hand-written inputs below quote real published output and name the
URL it was copied from ("format per ...").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _evidence as ev
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _fix as fx
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _packages as pk
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _verdict as vd
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _versions as vs

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures')
CORPUS = os.path.join(FIXTURES, 'nvidia')
LIVE = os.path.join(FIXTURES, 'nvidia_live')
FORMATS = os.path.join(FIXTURES, 'nvidia_formats')


def evaluate(evidence):
    """The facts of the verdict with the fix plan the pure rules (or ``available``) give, as the module reports them."""
    verdict = vd.evaluate(evidence)
    plan = fx.plan_fix(verdict, evidence.get('available'))
    return dict(verdict.to_json(), fix_packages=plan.pins, fix_skipped=plan.skipped)


# corpus file -> evidence key of evaluate() (the file names of the corpus README)
FILES = {
    'proc_driver_nvidia_version.txt': 'proc_version',
    'nvidia-smi.txt': 'nvidia_smi',
    'nvidia-smi-query-gpu.txt': 'nvidia_smi_query',
    'dpkg-query.txt': 'dpkg',
    'rpm-qa.txt': 'rpm',
    'ls_libnvidia.txt': 'libraries',
    'dmesg.txt': 'kernel_log',
}
# Evidence the README mentions without a file name in its table (modinfo, sysfs, the journal, ...):
# matched by what the name says.  A file that matches nothing fails the test instead of being ignored.
PATTERNS = (
    ('query', 'nvidia_smi_query'), ('nvidia-smi', 'nvidia_smi'), ('nvidia_smi', 'nvidia_smi'),
    ('proc_driver', 'proc_version'), ('sys_module', 'sys_module_version'), ('modinfo', 'modinfo'),
    ('dpkg', 'dpkg'), ('rpm', 'rpm'), ('dnf', 'rpm'), ('yum', 'rpm'), ('pacman', 'pacman'),
    ('ldconfig', 'libraries'), ('ls_', 'libraries'), ('libnvidia', 'libraries'),
    ('dmesg', 'kernel_log'), ('journal', 'kernel_log'), ('syslog', 'kernel_log'), ('kern', 'kernel_log'), ('messages', 'kernel_log'),
    ('os-release', 'os_release'), ('os_release', 'os_release'),
)
NOT_EVIDENCE = ('expected.json', 'README.md', 'notes.md')


def evidence_key(filename):
    if filename in FILES:
        return FILES[filename]
    lowered = filename.lower()
    for pattern, key in PATTERNS:
        if pattern in lowered:
            return key
    raise AssertionError('no evidence type known for corpus file %s: teach tests/unit/plugins/module_utils/test_nvidia_driver.py' % filename)


FIELDS = ('kernel_module_version', 'kernel_module_flavor', 'userspace_versions', 'match', 'fix_packages')

CASES = sorted(name for name in os.listdir(CORPUS) if os.path.isdir(os.path.join(CORPUS, name)))


def _read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def load_case(name):
    directory = os.path.join(CORPUS, name)
    expected = json.loads(_read(os.path.join(directory, 'expected.json')))
    evidence = {}
    for filename in sorted(os.listdir(directory)):
        if filename in NOT_EVIDENCE:
            continue
        key = evidence_key(filename)
        text = _read(os.path.join(directory, filename))
        evidence[key] = evidence[key] + '\n' + text if key in evidence else text
    return evidence, expected


def test_corpus_is_complete():
    assert len(CASES) >= 16  # the shared split; more real cases may be added next to them
    for name in CASES:
        evidence, expected = load_case(name)
        assert evidence, name
        assert expected['source'].startswith('https://'), name


@pytest.mark.parametrize('name', CASES)
def test_corpus_case(name):
    evidence, expected = load_case(name)
    facts = evaluate(evidence)
    for field in FIELDS:
        assert facts[field] == expected[field], '%s: %s is %r, expected %r' % (name, field, facts[field], expected[field])


@pytest.mark.parametrize('name', CASES)
def test_corpus_case_context(name):
    """distro_family and in_container.

    The README says both come from the source's context when the files do not show them.  Without
    context, what evaluate() derives from the files (a dpkg listing means debian, rpm means redhat)
    must equal the expected value or be unknown (None), never contradict it.  The live module gets the
    context from /etc/os-release and the container markers; here it is the case's recorded context.
    """
    evidence, expected = load_case(name)
    derived = evaluate(evidence)
    assert derived['distro_family'] in (None, expected['distro_family'])
    if 'dpkg' in evidence or 'rpm' in evidence:
        assert derived['distro_family'] == expected['distro_family']
    evidence = dict(evidence, distro_family=expected['distro_family'], in_container=expected['in_container'])
    facts = evaluate(evidence)
    assert facts['distro_family'] == expected['distro_family']
    assert facts['in_container'] == expected['in_container']
    # The context never changes the driver facts.
    for field in FIELDS:
        assert facts[field] == derived[field]


@pytest.mark.parametrize('name', CASES)
def test_corpus_mismatches_are_consistent(name):
    evidence, expected = load_case(name)
    facts = evaluate(evidence)
    if expected['match'] is True:
        assert facts['mismatches'] == []
    if expected['match'] is False and expected['kernel_module_version'] and expected['userspace_versions']:
        # An NVML "version mismatch" without the NVML line has no version to show.
        differing = set(item['version'] for item in facts['mismatches'] if item['version'] is not None)
        assert differing == set(v for v in expected['userspace_versions'] if v != expected['kernel_module_version'])
        assert all(item['expected'] == expected['kernel_module_version'] for item in facts['mismatches'])


# ---------------------------------------------------------------------------
# /proc/driver/nvidia/version
# ---------------------------------------------------------------------------

def test_proc_open_banner():
    facts = ev.parse_proc_version(_read(os.path.join(CORPUS, 'ubuntu2404-open-565-proc-only', 'proc_driver_nvidia_version.txt')))
    assert facts['version'] == '565.57.01'
    assert facts['flavor'] == 'open'
    assert facts['arch'] == 'x86_64'
    assert facts['gcc'].startswith('gcc version 13.3.0')


def test_proc_proprietary_banner():
    facts = ev.parse_proc_version(_read(os.path.join(CORPUS, 'truenas-module-580-173-nvml-580-178', 'proc_driver_nvidia_version.txt')))
    assert (facts['version'], facts['flavor'], facts['arch']) == ('580.173.02', 'proprietary', 'x86_64')


def test_proc_jetson_l4t_release_number():
    # format per https://github.com/nix-community/nixGL/issues/139 (Jetson Orin NX, L4T 35.3.1)
    text = ('NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  35.3.1  Release Build  '
            '(buildbrain@mobile-u64-6289-d7000)  Sun Mar 19 08:09:33 PDT 2023\n'
            'GCC version:  gcc version 9.3.0 (Buildroot 2020.08) \n')
    facts = ev.parse_proc_version(text)
    assert (facts['version'], facts['flavor'], facts['arch']) == ('35.3.1', 'open', 'aarch64')
    result = evaluate({'proc_version': text})
    # An L4T release number is not a driver branch: the "below R515" rule must not fire.
    assert result['kernel_module_flavor'] == 'open'
    assert result['match'] is None


def test_l4t_packages_compare_only_with_an_l4t_module():
    proc_r35 = 'NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  35.3.1  Release Build  (buildbrain@mobile-u64-6289-d7000)\n'
    proc_r36 = proc_r35.replace('35.3.1', '540.4.0')
    dpkg = 'ii \tnvidia-l4t-cuda\t35.3.1-20230319081403\tarm64\tNVIDIA CUDA Package\n'
    assert evaluate({'proc_version': proc_r35, 'dpkg': dpkg})['match'] is True
    facts = evaluate({'proc_version': proc_r36, 'dpkg': dpkg.replace('35.3.1', '36.4.3')})
    assert facts['match'] is None and facts['userspace_versions'] == []
    assert facts['excluded_packages'][0]['reason'] == 'l4t-release'


def test_proc_absent_or_garbage():
    assert ev.parse_proc_version(None) is None
    assert ev.parse_proc_version('') is None
    assert ev.parse_proc_version('cat: /proc/driver/nvidia/version: No such file or directory\n') is None


def test_sys_module_version():
    assert ev.parse_sys_module_version('570.148.06\n') == '570.148.06'
    assert ev.parse_sys_module_version('570.144\n') == '570.144'
    assert ev.parse_sys_module_version('') is None
    assert ev.parse_sys_module_version('garbage\n') is None


def test_sys_module_version_is_used_without_proc():
    facts = evaluate({'sys_module_version': '575.64\n', 'libraries': 'libcuda.so.575.64.03\n'})
    assert facts['kernel_module_version'] == '575.64'
    assert facts['kernel_module_source'] == ev.SYS_MODULE_VERSION_PATH
    # A real two-part version is never prefix-matched against a three-part one.
    assert facts['match'] is False


def test_proc_and_sys_disagree_is_noted():
    proc = _read(os.path.join(CORPUS, 'truenas-module-580-173-nvml-580-178', 'proc_driver_nvidia_version.txt'))
    facts = evaluate({'proc_version': proc, 'sys_module_version': '580.178.04\n'})
    assert facts['kernel_module_version'] == '580.173.02'
    assert any('580.178.04' in note for note in facts['notes'])


# ---------------------------------------------------------------------------
# modinfo
# ---------------------------------------------------------------------------

# format per https://github.com/Frogging-Family/nvidia-all/issues/394
MODINFO_OPEN = """filename:       /lib/modules/7.0.12-zen1-1-zen/updates/dkms/nvidia.ko.zst
import_ns:      DMA_BUF
alias:          char-major-195-*
description:    NVIDIA core GPU kernel module
version:        595.80
supported:      external
license:        Dual MIT/GPL
firmware:       nvidia/595.80/gsp_tu10x.bin
firmware:       nvidia/595.80/gsp_ga10x.bin
"""


def test_modinfo():
    facts = ev.parse_modinfo(MODINFO_OPEN)
    assert facts['version'] == '595.80'
    assert facts['license'] == 'Dual MIT/GPL'
    assert ev.flavor_from_license(facts['license']) == 'open'
    assert ev.flavor_from_license('NVIDIA') == 'proprietary'
    assert ev.flavor_from_license('GPL') is None


def test_a_module_file_on_disk_is_not_a_loaded_module():
    # installed, not rebooted: modinfo reads the file, nothing is loaded (the nvidia_driver role then reboots)
    facts = evaluate({'modinfo': MODINFO_OPEN})
    assert facts['kernel_module_version'] is None
    assert facts['module_file_version'] == '595.80'
    assert facts['kernel_module_flavor'] is None
    assert facts['match'] is None


def test_modinfo_gives_the_flavor_of_the_loaded_module_when_it_is_that_file():
    facts = evaluate({'modinfo': MODINFO_OPEN, 'sys_module_version': '595.80\n'})
    assert (facts['kernel_module_version'], facts['kernel_module_flavor']) == ('595.80', 'open')
    facts = evaluate({'modinfo': MODINFO_OPEN, 'sys_module_version': '590.48.01\n'})
    assert (facts['kernel_module_version'], facts['kernel_module_flavor']) == ('590.48.01', None)


# ---------------------------------------------------------------------------
# Kernel log
# ---------------------------------------------------------------------------

# format per https://github.com/stackhpc/ansible-slurm-appliance/issues/287 (rsyslog #012 escapes)
SYSLOG_012 = ("Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: the client has the version 535.54.03, but#012NVRM: this kernel "
              "module has the version 530.30.02.  Please#012NVRM: make sure that this kernel module and all NVIDIA driver#012NVRM: "
              "components have the same version.\n")

# format per https://github.com/Frogging-Family/nvidia-all/issues/394 (new wording with client name and pid)
DMESG_NEW_WORDING = """[    8.805842] r8169 0000:83:00.0: invalid VPD tag 0xff (size 0) at offset 0; assume missing optional EEPROM
[    9.424670] NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)
               NVRM: has the version 595.84, but this kernel module has
               NVRM: the version 595.80.  Please make sure that this
               NVRM: kernel module and all NVIDIA driver components
               NVRM: have the same version.
"""

# format per https://github.com/NVIDIA/open-gpu-kernel-modules/issues/829 (journal, new wording)
JOURNAL_NEW_WORDING = """Apr 19 12:34:42 Kyrios kernel: NVRM: API mismatch: the client 'nvidia-powerd' (pid 849)
                               NVRM: has the version 570.133.07, but this kernel module has
                               NVRM: the version 575.51.02.  Please make sure that this
                               NVRM: kernel module and all NVIDIA driver components
                               NVRM: have the same version.
"""

# format per https://github.com/NVIDIA/open-gpu-kernel-modules/issues/626 (journal, open banner, old wording)
JOURNAL_OPEN_BANNER = _read(os.path.join(FORMATS, 'journal-open-banner-550.txt'))

# format per https://github.com/void-linux/void-packages/issues/4473
MODESET_MISMATCH = 'nvidia-modeset: Version mismatch: nvidia.ko(410.73) nvidia-modeset.ko(390.87)\n'

# format per https://github.com/Nobara-Project/rpm-sources/issues/526 (wrapped as published)
GSP_MISMATCH = """NVRM: GPU0 _kgspFwContainerVerifyVersion: GSP firmware image version mismatch:
got version 595.71.05, expected version 595.58.03
NVRM: GPU0 kgspInitRm_IMPL: Error preparing GSP-RM image
"""

# format per https://github.com/CachyOS/CachyOS-PKGBUILDS/pull/1769 (the stack unloading, journal)
JOURNAL_UNLOAD = """sie 25 20:19:12 experience kernel: [drm] [nvidia-drm] [GPU ID 0x00000100] Unloading driver
sie 25 20:19:12 experience kernel: nvidia-modeset: Unloading
sie 25 20:19:13 experience kernel: nvidia-nvlink: Unregistered Nvlink Core, major device number 237
"""


def test_syslog_012_newlines():
    facts = evaluate({'kernel_log': SYSLOG_012})
    assert facts['kernel_module_version'] == '530.30.02'
    assert facts['userspace_versions'] == ['535.54.03']
    assert facts['match'] is False


def test_api_mismatch_new_wording_dmesg():
    events = ev.parse_kernel_log(DMESG_NEW_WORDING)['events']
    assert events == [{'kind': 'api_mismatch', 'client': '595.84', 'module': '595.80', 'client_name': 'kwin_wayland', 'pid': 1005}]
    facts = evaluate({'kernel_log': DMESG_NEW_WORDING})
    assert (facts['kernel_module_version'], facts['userspace_versions'], facts['match']) == ('595.80', ['595.84'], False)
    assert facts['mismatches'][0]['component'] == "NVRM client 'kwin_wayland'"


def test_api_mismatch_new_wording_journal():
    facts = evaluate({'kernel_log': JOURNAL_NEW_WORDING})
    assert (facts['kernel_module_version'], facts['userspace_versions'], facts['match']) == ('575.51.02', ['570.133.07'], False)


def test_open_banner_in_journal_and_old_wording():
    facts = evaluate({'kernel_log': JOURNAL_OPEN_BANNER})
    assert facts['kernel_module_version'] == '550.67'
    assert facts['kernel_module_flavor'] == 'open'
    assert facts['userspace_versions'] == ['550.76']
    assert facts['match'] is False


def test_banner_after_unload_is_not_the_loaded_module():
    banner = _read(os.path.join(CORPUS, 'aarch64-proprietary-535-dmesg', 'dmesg.txt'))
    assert evaluate({'kernel_log': banner})['kernel_module_version'] == '535.161.07'
    facts = evaluate({'kernel_log': banner + JOURNAL_UNLOAD})
    assert facts['kernel_module_version'] is None
    assert any('unloaded' in note for note in facts['notes'])
    # Loaded again afterwards: the newest banner counts.
    facts = evaluate({'kernel_log': banner + JOURNAL_UNLOAD + JOURNAL_OPEN_BANNER.splitlines()[0] + '\n'})
    assert (facts['kernel_module_version'], facts['kernel_module_flavor']) == ('550.67', 'open')


def test_stale_api_mismatch_for_another_module_is_ignored():
    proc = 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n'
    facts = evaluate({'proc_version': proc, 'kernel_log': SYSLOG_012})
    assert facts['kernel_module_version'] == '535.54.03'
    assert facts['match'] is None
    assert any('older NVRM API mismatch' in note for note in facts['notes'])


def test_api_mismatch_before_a_reload_is_stale():
    # The module was loaded again (same version as before) after the mismatch: the old client is gone.
    banner = JOURNAL_OPEN_BANNER.splitlines()[0] + '\n'
    facts = evaluate({'kernel_log': JOURNAL_OPEN_BANNER + banner})
    assert facts['kernel_module_version'] == '550.67'
    assert facts['userspace_versions'] == []
    assert facts['match'] is None
    assert any('before the module was loaded again' in note for note in facts['notes'])


def test_lookalike_modeset_is_not_userspace_drift():
    facts = evaluate({'kernel_log': MODESET_MISMATCH})
    assert facts['match'] is None
    assert facts['userspace_versions'] == []
    assert [finding['kind'] for finding in facts['findings']] == ['modeset-vs-nvidia-ko']
    assert '390.87' in facts['findings'][0]['message']


def test_lookalike_gsp_firmware_is_not_userspace_drift():
    facts = evaluate({'kernel_log': GSP_MISMATCH, 'modinfo': 'version:        595.58.03\n'})
    assert facts['module_file_version'] == '595.58.03'
    assert facts['match'] is None
    assert [finding['kind'] for finding in facts['findings']] == ['gsp-firmware-mismatch']


def test_gsp_missing_firmware_is_reported():
    dmesg = _read(os.path.join(CORPUS, 'fedora-image-570-144-module-570-153-client', 'dmesg.txt'))
    facts = evaluate({'kernel_log': dmesg})
    assert 'gsp-firmware-missing' in [finding['kind'] for finding in facts['findings']]


def test_taint_line_means_proprietary():
    facts = evaluate({'kernel_log': "[    3.656114] nvidia: module license 'NVIDIA' taints kernel.\n",
                      'nvidia_smi_query': '580.95.05\n'})
    assert facts['kernel_module_flavor'] == 'proprietary'


# ---------------------------------------------------------------------------
# nvidia-smi
# ---------------------------------------------------------------------------

def test_smi_normal_header():
    facts = ev.parse_nvidia_smi(_read(os.path.join(CORPUS, 'ubuntu2404-role-560-match-new-header', 'nvidia-smi.txt')))
    assert (facts['smi_version'], facts['driver_version'], facts['cuda_version']) == ('560.35.03', '560.35.03', '12.6')
    assert not facts['nvml_mismatch']


def test_smi_version_option():
    # "nvidia-smi --version" (the command parsed in https://github.com/containers/ramalama/pull/1311); these four lines
    # are quoted verbatim in public READMEs for a container with driver 590.48.01
    text = ('NVIDIA-SMI version  : 590.48.01\n'
            'NVML version        : 590.48\n'
            'DRIVER version      : 590.48.01\n'
            'CUDA Version        : 13.1\n')
    facts = ev.parse_nvidia_smi(text)
    assert (facts['smi_version'], facts['driver_version'], facts['cuda_version']) == ('590.48.01', '590.48.01', '13.1')
    result = evaluate({'nvidia_smi': text})
    assert (result['kernel_module_version'], result['userspace_versions'], result['match']) == ('590.48.01', ['590.48.01'], True)


def test_smi_mismatch_with_and_without_nvml_line():
    with_line = ev.parse_nvidia_smi(_read(os.path.join(CORPUS, 'docker-image-nvml-565-on-535-host', 'nvidia-smi.txt')))
    assert with_line['nvml_mismatch'] and with_line['nvml_version'] == '565.57'
    without = ev.parse_nvidia_smi(_read(os.path.join(CORPUS, 'rhel7-cuda-repo-465-mismatch', 'nvidia-smi.txt')))
    assert without['nvml_mismatch'] and without['nvml_version'] is None


def test_smi_query_multi_gpu():
    facts = ev.parse_nvidia_smi(_read(os.path.join(CORPUS, 'query-gpu-driver-version-multi-gpu', 'nvidia-smi-query-gpu.txt')))
    assert facts['query_versions'] == ['515.57', '515.57']


def test_smi_binary_vs_nvml_lookalike():
    # format per https://github.com/CFSworks/nvml_fix/issues/2
    text = ('Mismatch in versions between nvidia-smi and NVML.\n'
            'Are you sure you are using nvidia-smi provided with the driver?\n'
            'Failed to properly shut down NVML: Function Not Found\n')
    facts = evaluate({'nvidia_smi': text})
    assert facts['match'] is None
    assert [finding['kind'] for finding in facts['findings']] == ['nvidia-smi-vs-nvml']


def test_smi_no_driver():
    # format per https://github.com/NVIDIA/nvidia-docker/issues/988 (wrapped as published)
    text = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure\n"
            " that the latest NVIDIA driver is installed and running.\n")
    facts = evaluate({'nvidia_smi': text})
    assert facts['match'] is None and facts['kernel_module_version'] is None
    assert [finding['kind'] for finding in facts['findings']] == ['no-driver']


def test_nvml_prefix_only_for_the_nvml_line():
    proc = 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.16  Thu Jan 16 01:00:00 UTC 2025\n'
    nvml = 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.86\n'
    # NVML agrees as a prefix, but NVML itself said mismatch: still false, and nothing else to list.
    facts = evaluate({'proc_version': proc, 'nvidia_smi': nvml})
    assert facts['match'] is False
    assert facts['userspace_versions'] == ['570.86']
    assert vs.version_consistent('570.86', '570.86.16', nvml=True)
    assert not vs.version_consistent('570.86', '570.86.16')
    assert not vs.version_consistent('575.64', '575.64.03')
    assert not vs.version_consistent('570.8', '570.86.16', nvml=True)


# ---------------------------------------------------------------------------
# Library names
# ---------------------------------------------------------------------------

def test_library_names_from_ls():
    libs = ev.parse_library_names(_read(os.path.join(CORPUS, 'ubuntu-ls-libnvidia-550-90-07', 'ls_libnvidia.txt')))
    assert libs == {'libnvidia-ml.so': ['550.90.07'], 'libcudadebugger.so': ['550.90.07'], 'libcuda.so': ['550.90.07']}


def test_library_names_skip_own_versioned_and_unrelated():
    text = '\n'.join(['/usr/lib/x86_64-linux-gnu/libnvidia-egl-wayland.so.1.1.13', '/usr/lib/x86_64-linux-gnu/libnvidia-container.so.1.17.8',
                      '/usr/lib/x86_64-linux-gnu/libicudata.so.70.1', '/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1',
                      '/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0', '/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.565.57.01'])
    assert ev.parse_library_names(text) == {'libnvidia-ptxjitcompiler.so': ['565.57.01']}


@pytest.mark.skipif(not shutil.which('ldconfig') and not os.path.exists('/sbin/ldconfig'), reason='glibc ldconfig not installed')
def test_ldconfig_p_format_from_real_ldconfig():
    """Run the real ldconfig -p of this machine and check the parser reads its line format."""
    out = subprocess.run(['ldconfig', '-p'], capture_output=True, text=True, env={'LC_ALL': 'C', 'PATH': '/usr/sbin:/sbin:/usr/bin:/bin'},
                         check=True).stdout
    line = next(line for line in out.splitlines() if 'libc.so.6 ' in line)
    # The parser keeps NVIDIA names only; the same line with an NVIDIA soname must parse.
    nvidia_line = line.replace('libc.so.6', 'libnvidia-ml.so.1')
    entries = ev.parse_ldconfig_p(nvidia_line)
    assert len(entries) == 1 and entries[0][0] == 'libnvidia-ml.so.1' and entries[0][2].endswith('libnvidia-ml.so.1')
    assert ev.parse_ldconfig_p(out) == [entry for entry in ev.parse_ldconfig_p(out) if 'nvidia' in entry[0] or 'cuda' in entry[0]]


# ---------------------------------------------------------------------------
# Packages
# ---------------------------------------------------------------------------

def test_dpkg_column_view_with_header():
    pkgs = pk.parse_dpkg(_read(os.path.join(CORPUS, 'debian-bookworm-smi-525-module-520', 'dpkg-query.txt')))
    assert [(p['status'], p['name'], p['upstream'], p['revision'], p['arch']) for p in pkgs] == [('ii', 'nvidia-smi', '525.85.12', '1', 'amd64')]


@pytest.mark.skipif(not shutil.which('dpkg-query'), reason='dpkg-query not installed (not a Debian-family machine)')
def test_dpkg_machine_format_from_real_dpkg_query():
    """The live module's own dpkg-query format, produced by the real dpkg-query of this machine."""
    fmt = pk.DPKG_QUERY_FORMAT.replace('\\\\', '\\')
    out = subprocess.run(['dpkg-query', '-W', '-f', fmt, 'dpkg', 'libc6'], capture_output=True, text=True, check=True).stdout
    version = subprocess.run(['dpkg-query', '-W', '-f', '${Version}', 'dpkg'], capture_output=True, text=True, check=True).stdout
    pkgs = dict((p['name'], p) for p in pk.parse_dpkg(out))
    assert pkgs['dpkg']['version'] == version
    assert pkgs['dpkg']['status'] == 'ii'
    assert pkgs['libc6']['arch_qualifier'] is not None
    assert pkgs['dpkg']['summary']


def test_ubuntu_server_packages_kernel_side_and_upload_counter():
    # format per https://github.com/NVIDIA/gpu-driver-container/pull/186 (complete rows only)
    text = _read(os.path.join(FORMATS, 'dpkg-l-ubuntu-550-server.txt'))
    proc = 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 10:10:01 UTC 2024\n'
    facts = evaluate({'dpkg': text, 'proc_version': proc})
    assert [p['name'] for p in facts['packages']] == [
        'libnvidia-cfg1-550-server:amd64', 'libnvidia-compute-550-server:amd64', 'nvidia-compute-utils-550-server']
    assert facts['userspace_versions'] == ['550.127.08']
    assert facts['match'] is False
    # -0ubuntu0.24.04.1 carries a per-upload counter: no pin can be derived without the archive's list.
    assert facts['fix_packages'] == []
    assert len(facts['fix_skipped']) == 3
    excluded = dict((p['name'], p['reason']) for p in facts['excluded_packages'])
    assert excluded['nvidia-firmware-550-server-550.127.08'] == 'kernel-side'
    assert excluded['linux-modules-nvidia-550-server-6.8.0-51-generic'] == 'kernel-side'


def test_fedora_rpm_fix_pins_with_multilib():
    # format per https://github.com/negativo17/nvidia-driver/issues/43 (dmesg and rpm -qa of the same report)
    dmesg = """NVRM: API mismatch: the client has the version 390.25, but
NVRM: this kernel module has the version 390.12.  Please
NVRM: make sure that this kernel module and all NVIDIA driver
NVRM: components have the same version.
"""
    rpm = """dkms-nvidia-390.25-1.fc27.x86_64
nvidia-driver-390.25-1.fc27.x86_64
nvidia-driver-cuda-390.25-1.fc27.x86_64
nvidia-driver-cuda-libs-390.25-1.fc27.i686
nvidia-driver-cuda-libs-390.25-1.fc27.x86_64
nvidia-driver-libs-390.25-1.fc27.i686
nvidia-driver-libs-390.25-1.fc27.x86_64
nvidia-driver-NVML-390.25-1.fc27.x86_64
nvidia-libXNVCtrl-390.25-1.fc27.x86_64
nvidia-persistenced-390.25-1.fc27.x86_64
nvidia-settings-390.25-1.fc27.x86_64
"""
    facts = evaluate({'kernel_log': dmesg, 'rpm': rpm})
    assert facts['kernel_module_version'] == '390.12'
    assert facts['kernel_module_flavor'] == 'proprietary'  # R390 < R515
    assert facts['distro_family'] == 'redhat'
    assert facts['userspace_versions'] == ['390.25']
    assert facts['fix_packages'] == [
        'nvidia-driver-390.12-1.fc27',
        'nvidia-driver-cuda-390.12-1.fc27',
        'nvidia-driver-cuda-libs-390.12-1.fc27.i686',
        'nvidia-driver-cuda-libs-390.12-1.fc27.x86_64',
        'nvidia-driver-libs-390.12-1.fc27.i686',
        'nvidia-driver-libs-390.12-1.fc27.x86_64',
        'nvidia-driver-NVML-390.12-1.fc27',
    ]


def test_rpm_machine_format():
    text = 'libnvidia-ml\t3\t570.86.16\t1.el8\tx86_64\tNVIDIA Management Library (NVML)\n'
    pkg = pk.parse_rpm(text)[0]
    assert (pkg['name'], pkg['epoch'], pkg['upstream'], pkg['revision'], pkg['arch']) == ('libnvidia-ml', '3', '570.86.16', '1.el8', 'x86_64')


@pytest.mark.parametrize('name, version, summary, kind', [
    ('nvidia-driver-545', '550.120-0ubuntu0.24.04.1', '', 'transitional'),            # name's branch differs from the version's
    ('nvidia-driver-570', '580.95.05-0ubuntu1', 'Transitional package for nvidia-driver-580', 'transitional'),
    ('libnvidia-compute', '590.48.01-0ubuntu1', 'NVIDIA libcompute package', 'userspace'),  # CUDA repo 590: no branch in the name
    ('nvidia-dkms-580-open', '580.95.05-0ubuntu1', '', 'kernel-side'),
    ('nvidia-kernel-common-580', '580.95.05-0ubuntu1', '', 'kernel-side'),
    ('nvidia-driver-latest-dkms', '465.19.01-1.el7', '', 'userspace'),
    ('nvidia-kernel-open-dkms', '550.54.15-1', '', 'kernel-side'),
    ('nvidia-open-kernel-support', '535.261.03-1', '', 'kernel-side'),      # Debian open module support files
    ('nvidia-tesla-535-kernel-support', '535.261.03-1', '', 'kernel-side'),
    ('firmware-nvidia-gsp', '535.261.03-1', '', 'kernel-side'),
    ('nvidia-container-toolkit', '1.17.8-1', '', 'own-version'),
    ('nvidia-settings', '570.86.16-1.el8', '', 'own-version'),
    ('cuda-drivers', '465.19.01-1', '', 'userspace'),
    ('cuda-cudart-11-3', '11.3.58-1', '', 'own-version'),
    ('nvidia-l4t-core', '35.3.1-20230319081403', '', 'userspace'),
    ('nvidia-l4t-kernel', '5.10.104-tegra-35.3.1-20230319081403', '', 'kernel-side'),
])
def test_classify_package(name, version, summary, kind):
    epoch, upstream, revision = pk.split_debian_version(version)
    pkg = {'status': 'ii', 'name': name, 'upstream': upstream, 'revision': revision, 'summary': summary}
    assert pk.classify_package(pkg) == kind


def test_not_installed_rows_are_ignored():
    text = ('rc  libnvidia-compute-535:amd64 535.183.01-0ubuntu1 amd64 NVIDIA libcompute package\n'
            'un  nvidia-driver-binary <none> <none> (no description available)\n')
    facts = evaluate({'dpkg': text})
    assert facts['packages'] == [] and facts['userspace_versions'] == []


# ---------------------------------------------------------------------------
# Fix planning with the repository's real version list
# ---------------------------------------------------------------------------

def test_fix_with_real_apt_cache_madison():
    available = pk.parse_apt_madison(_read(os.path.join(LIVE, 'apt-cache-madison.txt')))
    assert available['libnvidia-ml1'] == ['535.309.01-0+deb12u1', '535.261.03-1']
    dpkg = ('ii \tlibnvidia-ml1:amd64\t535.309.01-0+deb12u1\tamd64\tNVIDIA Management Library (NVML) runtime library\n'
            'ii \tnvidia-smi\t535.309.01-0+deb12u1\tamd64\tNVIDIA System Management Interface\n')
    proc = 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Wed Jul 16 20:21:07 UTC 2025\n'
    # Without the list: Debian's security revision carries a counter, so nothing is certain.
    facts = evaluate({'dpkg': dpkg, 'proc_version': proc})
    assert facts['fix_packages'] == [] and facts['match'] is False
    facts = evaluate({'dpkg': dpkg, 'proc_version': proc, 'available': available})
    assert facts['fix_packages'] == ['libnvidia-ml1=535.261.03-1', 'nvidia-smi=535.261.03-1']
    # A version the repositories do not have is reported, not guessed.
    proc_gone = proc.replace('535.261.03', '535.247.01')
    facts = evaluate({'dpkg': dpkg, 'proc_version': proc_gone, 'available': available})
    assert facts['fix_packages'] == []
    assert [item['name'] for item in facts['fix_skipped']] == ['libnvidia-ml1', 'nvidia-smi']
    assert facts['fix_skipped'][0]['reason'] == 'no version 535.247.01 of libnvidia-ml1 is available from the configured repositories'


def test_real_apt_simulation_parse():
    plan = pk.parse_apt_simulation(_read(os.path.join(LIVE, 'apt-get-s-install.txt')))
    installs = dict((name, new) for name, old, new in plan['install'])
    assert installs['libnvidia-ml1'] == '535.261.03-1'
    assert installs['nvidia-alternative'] == '535.261.03-1'
    assert plan['remove'] == []


def test_apt_simulation_upgrade_and_remove_lines():
    # apt-get -s line format for an installed package and a removal (apt-pkg's simulation output)
    text = ('Remv nvidia-driver-565 [565.57.01-0ubuntu1]\n'
            'Inst libnvidia-compute-565 [565.57.01-0ubuntu1] (590.48.01-0ubuntu1 cuda [amd64])\n')
    plan = pk.parse_apt_simulation(text)
    assert plan['remove'] == [('nvidia-driver-565', '565.57.01-0ubuntu1')]
    assert plan['install'] == [('libnvidia-compute-565', '565.57.01-0ubuntu1', '590.48.01-0ubuntu1')]


# ---------------------------------------------------------------------------
# Context and decisions
# ---------------------------------------------------------------------------

def test_os_release_families():
    assert ev.parse_os_release('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')['family'] == 'debian'
    assert ev.parse_os_release('ID=ubuntu\nID_LIKE=debian\n')['family'] == 'debian'
    assert ev.parse_os_release('ID="rocky"\nID_LIKE="rhel centos fedora"\n')['family'] == 'redhat'
    assert ev.parse_os_release('ID=arch\n')['family'] is None


@pytest.mark.parametrize('files, expected', [
    ({'/run/systemd/container': 'lxc\n'}, (True, 'lxc')),
    ({'/run/systemd/container': 'systemd-nspawn\n'}, (True, 'systemd-nspawn')),
    ({'/proc/1/environ': 'PATH=/bin\0container=lxc\0'}, (True, 'lxc')),
    ({'/.dockerenv': True}, (True, 'docker')),
    ({'/run/.containerenv': True}, (True, 'podman')),
    ({'/proc/1/cgroup': '12:devices:/lxc/101\n'}, (True, 'lxc')),
    ({'/proc/1/cgroup': '0::/init.scope\n', '/proc/1/environ': 'PATH=/bin\0'}, (False, None)),
])
def test_detect_container(files, expected):
    assert ev.detect_container(files)[:2] == expected


def test_recommendation_bare_host_vs_container():
    proc = _read(os.path.join(CORPUS, 'debian-bookworm-smi-525-module-520', 'proc_driver_nvidia_version.txt'))
    dpkg = _read(os.path.join(CORPUS, 'debian-bookworm-smi-525-module-520', 'dpkg-query.txt'))
    base = {'proc_version': proc, 'dpkg': dpkg}
    container = vd.evaluate(dict(base, container_files={'/run/systemd/container': 'lxc\n'}))
    assert vd.recommend(container, True) == 'install_userspace'
    # Bare host whose module file on disk is newer: reboot, not a user-space downgrade.
    newer = vd.evaluate(dict(base, container_files={}, modinfo='version:        525.85.12\nlicense:        NVIDIA\n'))
    assert vd.recommend(newer, True) == 'reboot'
    assert 'reboot' in vd.describe(newer, 'reboot')
    # Bare host whose module file is the loaded one: user space moved alone, install it.
    same = vd.evaluate(dict(base, container_files={}, modinfo='version:        520.56.06\nlicense:        NVIDIA\n'))
    assert vd.recommend(same, True) == 'install_userspace'
    plan = fx.plan_fix(same)
    assert plan.pins == ['nvidia-smi=520.56.06-1']
    assert 'nvidia-smi=520.56.06-1' in vd.describe(same, 'install_userspace', plan.pins, plan.skipped)


# ---------------------------------------------------------------------------
# More package formats
# ---------------------------------------------------------------------------

def test_pacman_qs_listing():
    # format per https://wiki.archlinux.org/title/Pacman#Querying_package_databases ("pacman -Qs": repo/name version,
    # description indented below); rows as published in Arch installation notes
    text = """local/lib32-nvidia-utils 550.90.07-1
    NVIDIA drivers utilities (32-bit)
local/libvdpau 1.5-2
    Nvidia VDPAU library
local/nvidia-open-dkms 550.90.07-1
    NVIDIA open GPU kernel modules
local/nvidia-settings 550.90.07-1
    Tool for configuring the NVIDIA graphics driver
local/nvidia-utils 550.90.07-1
    NVIDIA drivers utilities
"""
    facts = evaluate({'pacman': text, 'kernel_log': SYSLOG_012})
    assert sorted(p['name'] for p in facts['packages']) == ['lib32-nvidia-utils', 'nvidia-utils']
    assert facts['distro_family'] is None
    assert facts['fix_packages'] == []  # the fix only speaks apt and dnf
    kinds = dict((p['name'], p['reason']) for p in facts['excluded_packages'])
    assert kinds['nvidia-open-dkms'] == 'kernel-side' and kinds['nvidia-settings'] == 'own-version'


def test_pacman_module_packages_are_kernel_side():
    for name in ('nvidia', 'nvidia-open', 'nvidia-lts', 'nvidia-open-lts'):
        pkg = {'status': 'ii', 'name': name, 'upstream': '570.86.16', 'revision': '2', 'summary': '', 'manager': 'pacman'}
        assert pk.classify_package(pkg) == 'kernel-side', name


def test_dnf_list_installed():
    # format per https://dnf.readthedocs.io/en/latest/command_ref.html#list-command (name.arch, [epoch:]version-release,
    # @repo when installed; long names wrap); rows from a published RHEL 8 CUDA repository listing
    text = """Installed Packages
cuda-compat-11-0.x86_64                    1:450.51.05-1     @cuda-rhel8-x86_64
kmod-nvidia-latest-dkms.x86_64             3:450.51.06-1.el8 @cuda-rhel8-x86_64
nvidia-driver.x86_64                       3:450.51.06-1.el8 @cuda-rhel8-x86_64
nvidia-driver-cuda-libs.x86_64             3:450.51.06-1.el8 @cuda-rhel8-x86_64
nvidia-fabricmanager-450.x86_64            450.51.06-1       @cuda-rhel8-x86_64
nvidia-kmod-common.noarch                  3:450.51.06-1.el8 @cuda-rhel8-x86_64
Available Packages
nvidia-driver-NVML.x86_64                  3:450.51.06-1.el8 cuda-rhel8-x86_64
"""
    proc = 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  450.36.06  Thu May 28 20:51:21 UTC 2020\n'
    facts = evaluate({'rpm': text, 'proc_version': proc})
    assert sorted(p['name'] for p in facts['packages']) == ['nvidia-driver', 'nvidia-driver-cuda-libs', 'nvidia-fabricmanager-450']
    assert facts['userspace_versions'] == ['450.51.06']
    assert facts['match'] is False
    assert facts['fix_packages'] == ['nvidia-driver-450.36.06-1.el8', 'nvidia-driver-cuda-libs-450.36.06-1.el8', 'nvidia-fabricmanager-450-450.36.06-1']
    kinds = dict((p['name'], p['reason']) for p in facts['excluded_packages'])
    # cuda-compat carries forward-compatible driver libraries on purpose: never drift.
    assert kinds['cuda-compat-11-0'] == 'own-version'
    assert kinds['kmod-nvidia-latest-dkms'] == 'kernel-side'


def test_proc_unknown_wording_falls_back_to_the_first_version():
    facts = ev.parse_proc_version('NVRM version: NVIDIA UNIX x86_64 Kernel Module for something new  590.48.01  Release Build\n')
    assert facts['version'] == '590.48.01'


def test_rpmfusion_kmodsrc_is_kernel_side():
    pkg = {'status': 'ii', 'name': 'xorg-x11-drv-nvidia-kmodsrc', 'upstream': '440.100', 'revision': '1.fc32', 'summary': '', 'manager': 'rpm'}
    assert pk.classify_package(pkg) == 'kernel-side'


# ---------------------------------------------------------------------------
# dnf: transaction tables, version locks, pins (real outputs in tests/fixtures/nvidia_live/dnf-*.txt)
# ---------------------------------------------------------------------------

def test_dnf_transaction_recorded():
    plan = pk.parse_dnf_transaction(_read(os.path.join(LIVE, 'dnf-assumeno-install.txt')))
    assert plan['resolved'] is True and plan['remove'] == []
    assert [(name, evr) for name, evr, dummy in plan['install']] == [
        ('nvidia-driver-NVML', '3:535.309.01-1.el9'), ('nvidia-driver-cuda', '3:535.309.01-1.el9'),
        ('nvidia-driver-cuda-libs', '3:535.309.01-1.el9'), ('nvidia-driver-libs', '3:535.309.01-1.el9'),
        ('nvidia-persistenced', '3:535.309.01-1.el9')]
    assert set(title for dummy, dummy2, title in plan['install']) == {'Upgrading'}


def test_dnf_transaction_wrapped_rows_removals_and_obsoletes():
    # dnf 4 layout (dnf/cli/output.py list_transaction): a name too long for its column is printed alone and the
    # rest of the row follows on the next line; "replacing" lines name the packages an obsoleting one removes.
    text = ('Dependencies resolved.\n' + '=' * 40 + '\n'
            'Installing:\n'
            ' nvidia-driver-cuda-libs-with-a-very-long-name\n'
            '                 x86_64   3:570.86.15-1.el8   cuda-rhel8-x86_64   50 M\n'
            ' libnvidia-ml    x86_64   3:570.86.15-1.el8   cuda-rhel8-x86_64  680 k\n'
            '     replacing  nvidia-driver-NVML.x86_64 3:550.90.07-1.el8\n'
            'Removing dependent packages:\n'
            ' cuda-nvml-devel-12-4  x86_64  12.4.127-1  @cuda-rhel8-x86_64  1.2 M\n'
            'Downgrading:\n'
            ' nvidia-persistenced   x86_64  3:570.86.15-1.el8  cuda-rhel8-x86_64  40 k\n'
            '\nTransaction Summary\n' + '=' * 40 + '\nInstall  2 Packages\n')
    plan = pk.parse_dnf_transaction(text)
    assert [name for name, dummy, dummy2 in plan['install']] == ['nvidia-driver-cuda-libs-with-a-very-long-name', 'libnvidia-ml',
                                                                 'nvidia-persistenced']
    assert plan['remove'] == [('nvidia-driver-NVML', '3:550.90.07-1.el8'), ('cuda-nvml-devel-12-4', '12.4.127-1')]


def test_dnf_transaction_unresolved():
    text = 'Error: Unable to find a match: nvidia-driver-cuda-libs-535.309.01-1.el9\n'
    assert pk.parse_dnf_transaction(text) == {'install': [], 'remove': [], 'resolved': False}


def test_versionlock_list_recorded():
    locks = pk.parse_versionlock_list(_read(os.path.join(LIVE, 'dnf-versionlock-list.txt')))
    assert sorted(locks) == ['nvidia-driver-NVML-3:535.261.03-1.el9.*', 'nvidia-driver-cuda-3:535.261.03-1.el9.*',
                             'nvidia-driver-cuda-libs-3:535.261.03-1.el9.*', 'nvidia-driver-libs-3:535.261.03-1.el9.*']
    names = sorted(pk.versionlock_name(entry) for entry in locks)
    assert names == ['nvidia-driver-NVML', 'nvidia-driver-cuda', 'nvidia-driver-cuda-libs', 'nvidia-driver-libs']
    # excludes ("!" entries) are not locks
    assert pk.parse_versionlock_list('!nvidia-driver-3:570.86.15-1.el8.*\n') == []


@pytest.mark.parametrize('pin, manager, name, version', [
    ('nvidia-driver-NVML-535.261.03-1.el8', 'dnf', 'nvidia-driver-NVML', '535.261.03-1.el8'),
    ('nvidia-driver-cuda-libs-535.261.03-1.el8.i686', 'dnf', 'nvidia-driver-cuda-libs', '535.261.03-1.el8'),
    ('libnvidia-ml1:amd64=535.261.03-1', 'apt', 'libnvidia-ml1', '535.261.03-1'),
])
def test_pin_name_and_version(pin, manager, name, version):
    assert pk.pin_name(pin, manager) == name
    assert pk.pin_version(pin, manager) == version


# ---------------------------------------------------------------------------
# GPUs on the PCI bus, driver versions for pre-flight checks, stale version locks
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('device, arch', [
    ('2684', 'ada'),          # GeForce RTX 4090
    ('2c18', 'blackwell'),    # GeForce RTX 5090 Laptop GPU
    ('2bb1', 'blackwell'),    # RTX PRO 6000 Blackwell
    ('2330', 'hopper'),       # H100 SXM5
    ('20b0', 'ampere'),       # A100 SXM4: first of the range ampere shares with turing's 21xx
    ('1e04', 'turing'),       # RTX 2080 Ti
    ('1db1', 'volta'),        # V100 SXM2: inside pascal's range, volta wins (first match)
    ('1b06', 'pascal'),       # GTX 1080 Ti
    ('1023', 'unknown'),      # Kepler K40: older than the table
    ('zzzz', 'unknown'),
])
def test_gpu_architecture(device, arch):
    assert ev.gpu_architecture(device) == arch


def test_parse_lspci_keeps_display_controllers_only():
    text = '01:00.0 0300: 10de:2684 (rev a1)\n01:00.1 0403: 10de:22ba (rev a1)\n41:00.0 0302: 10de:2330 (rev a1)\n'
    assert ev.parse_lspci(text) == [{'slot': '01:00.0', 'pci_id': '10de:2684', 'architecture': 'ada'},
                                    {'slot': '41:00.0', 'pci_id': '10de:2330', 'architecture': 'hopper'}]


def test_read_sysfs_gpus(tmp_path):
    for slot, vendor, cls, device in (('0000:01:00.0', '0x10de', '0x030000', '0x2bb1'), ('0000:01:00.1', '0x10de', '0x040300', '0x22e8'),
                                      ('0000:00:02.0', '0x8086', '0x030000', '0x3e92')):
        (tmp_path / slot).mkdir()
        for name, value in (('vendor', vendor), ('class', cls), ('device', device)):
            (tmp_path / slot / name).write_text(value + '\n')
    assert ev.read_sysfs_gpus(str(tmp_path)) == [{'slot': '0000:01:00.0', 'pci_id': '10de:2bb1', 'architecture': 'blackwell'}]


def test_driver_versions_from_proc_and_nvml_mismatch():
    """A drifted host: the module from /proc, user space only from the NVML library line of the failed nvidia-smi."""
    proc = 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.48.01  Release Build  (dvs-builder@U22-I3-AF03-09-1)\n'
    smi = 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n'
    versions = ev.driver_versions({'proc_version': proc, 'nvidia_smi': smi, 'nvidia_smi_query': smi})
    assert versions.to_json() == {'kernel_module': '590.48.01', 'kernel_module_source': '/proc/driver/nvidia/version', 'userspace': '580.95',
                                  'userspace_source': 'NVML library version line', 'cuda_driver': None, 'notes': []}


def test_driver_versions_from_library_files_only():
    versions = ev.driver_versions({'sys_module_version': '575.64.03\n', 'libraries': '/usr/lib64/libnvidia-ml.so.575.64.03\n'})
    assert (versions.kernel_module, versions.userspace, versions.userspace_source) == ('575.64.03', '575.64.03', 'library libnvidia-ml.so')


def test_stale_locks_against_the_recorded_versionlock_list():
    entries = pk.parse_versionlock_list(_read(os.path.join(LIVE, 'dnf-versionlock-list.txt')))
    assert pk.stale_locks(entries, {'nvidia-driver-cuda': '535.261.03-1.el9', 'nvidia-driver-NVML': '535.261.03-1.el9'}) == []
    assert pk.stale_locks(entries, {'nvidia-driver-cuda': '535.309.01-1.el9', 'kmod-nvidia-latest-dkms': '535.309.01-1.el9'}) == \
        ['nvidia-driver-cuda-3:535.261.03-1.el9.*']
