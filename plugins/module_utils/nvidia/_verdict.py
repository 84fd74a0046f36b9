# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The verdict on an NVIDIA driver: which kernel module is loaded, which user space is installed, whether they match.

Private module_utils of llmops.sglang.nvidia_driver_match and nvidia_driver_info.  Pure: :func:`evaluate` takes the
evidence mapping (:meth:`nvidia._evidence.EvidenceReader.gather`, or the recorded corpus) and returns a
:class:`Verdict`; it reads no file and runs no command, and it does not plan a fix (that is :mod:`nvidia._fix`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._evidence import (
    PROC_VERSION_PATH,
    SYS_MODULE_PATH,
    SYS_MODULE_VERSION_PATH,
    detect_container,
    flavor_from_license,
    parse_kernel_log,
    parse_library_names,
    parse_modinfo,
    parse_nvidia_smi,
    parse_os_release,
    parse_proc_version,
    parse_sys_module_version,
)
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._packages import classify_package, parse_dpkg, parse_pacman, parse_rpm
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._versions import (
    OPEN_MODULE_FIRST_BRANCH,
    major,
    version_consistent,
    version_key,
)

MODULE_RELOAD_HINT = 'modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia'


@dataclass
class Verdict:
    """What the evidence proves about the driver; :meth:`to_json` is the facts mapping the modules return from."""

    kernel_module_version: str | None = None
    kernel_module_source: str | None = None
    kernel_module_flavor: str | None = None
    kernel_module_flavor_source: str | None = None
    module_file_version: str | None = None
    userspace_versions: list = field(default_factory=list)
    # Every user-space part seen: {'component', 'version', 'nvml'} (nvml: a major.minor NVML line, a prefix).
    userspace_parts: list = field(default_factory=list)
    nvml_version: str | None = None
    libraries: dict = field(default_factory=dict)
    # Installed user-space packages as parsed (name, version, upstream, revision, epoch, arch, manager, ...).
    package_records: list = field(default_factory=list)
    excluded_packages: list = field(default_factory=list)
    match: bool | None = None
    mismatches: list = field(default_factory=list)
    findings: list = field(default_factory=list)
    distro_family: str | None = None
    in_container: bool | None = None
    container_kind: str | None = None
    package_manager: str | None = None
    notes: list = field(default_factory=list)

    @property
    def packages(self):
        """The installed user-space packages as reported: name (with ``:arch`` qualifier), version, arch."""
        return [{'name': pkg['name'] + (':' + pkg['arch_qualifier'] if pkg.get('arch_qualifier') else ''),
                 'version': pkg['version'], 'arch': pkg['arch']} for pkg in self.package_records]

    def to_json(self):
        facts = dict((name, getattr(self, name)) for name in self.__dataclass_fields__ if name not in ('package_records', 'userspace_parts'))
        facts['packages'] = self.packages
        facts['userspace_parts'] = [dict(part) for part in self.userspace_parts]
        return facts


class _Parsed:
    """Every evidence text parsed once."""

    def __init__(self, evidence):
        self.proc = parse_proc_version(evidence.get('proc_version'))
        self.sys_version = parse_sys_module_version(evidence.get('sys_module_version'))
        self.modinfo = parse_modinfo(evidence.get('modinfo'))
        self.smi = parse_nvidia_smi(evidence.get('nvidia_smi'))
        self.query = parse_nvidia_smi(evidence.get('nvidia_smi_query'))
        for name in ('smi_version', 'driver_version', 'cuda_version'):
            # Whichever nvidia-smi output carried the table header or the --version lines.
            self.smi[name] = self.smi[name] or self.query[name]
        self.events = parse_kernel_log(evidence.get('kernel_log'))['events']
        self.libraries = parse_library_names(evidence.get('libraries'))
        self.dpkg = parse_dpkg(evidence.get('dpkg'))
        self.rpm = parse_rpm(evidence.get('rpm'))
        self.pacman = parse_pacman(evidence.get('pacman'))
        loads = [index for index, event in enumerate(self.events) if event['kind'] == 'load']
        self.last_load_index = loads[-1] if loads else -1
        self.query_versions = self.query['query_versions'] or self.smi['query_versions']
        self.nvml_mismatch = self.smi['nvml_mismatch'] or self.query['nvml_mismatch']
        self.nvml_version = self.smi['nvml_version'] or self.query['nvml_version']

    def last_load(self):
        """The last loading banner and whether the stack was unloaded after it."""
        if self.last_load_index < 0:
            return None, False
        later = self.events[self.last_load_index + 1:]
        return self.events[self.last_load_index], any(event['kind'] == 'unload' for event in later)


def evaluate(evidence):
    """Turn collected evidence into a :class:`Verdict`.

    ``evidence`` keys (all optional): ``proc_version``, ``sys_module_version``,
    ``modinfo``, ``nvidia_smi``, ``nvidia_smi_query``, ``kernel_log``, ``dpkg``,
    ``rpm``, ``pacman``, ``libraries`` (text with library file names), ``os_release``,
    ``container_files`` (see :func:`detect_container`), ``distro_family`` and
    ``in_container`` (context when the other evidence cannot show it), ``flavor_hint``.
    """
    parsed = _Parsed(evidence)
    verdict = Verdict(module_file_version=parsed.modinfo['version'], nvml_version=parsed.nvml_version)
    _kernel_module(parsed, verdict)
    _flavor(parsed, verdict, evidence.get('flavor_hint'))
    verdict.findings = _findings(parsed)
    relevant_api, nvml_answered = _userspace(parsed, verdict)
    _match(parsed, verdict, relevant_api, nvml_answered)
    _context(parsed, verdict, evidence)
    return verdict


def _kernel_module(parsed, verdict):
    """The loaded module's version, in the README's order of preference: /proc, /sys, NVML, the kernel log."""
    notes = verdict.notes
    version, source = None, None
    if parsed.proc:
        version, source = parsed.proc['version'], PROC_VERSION_PATH
        if parsed.sys_version and parsed.sys_version != parsed.proc['version']:
            notes.append('%s says %s but %s says %s' % (PROC_VERSION_PATH, parsed.proc['version'], SYS_MODULE_VERSION_PATH, parsed.sys_version))
    elif parsed.sys_version:
        version, source = parsed.sys_version, SYS_MODULE_VERSION_PATH
    elif parsed.smi['driver_version']:
        version, source = parsed.smi['driver_version'], 'nvidia-smi'
    elif parsed.query_versions:
        version, source = parsed.query_versions[0], 'nvidia-smi --query-gpu=driver_version'
        if len(set(parsed.query_versions)) > 1:
            notes.append('nvidia-smi reported several driver versions: %s' % ', '.join(sorted(set(parsed.query_versions))))
    # An API mismatch logged before the last loading banner belongs to an earlier load of the module.
    current_api = [event for index, event in enumerate(parsed.events) if event['kind'] == 'api_mismatch' and index > parsed.last_load_index]
    if version is None and current_api:
        version, source = current_api[-1]['module'], 'kernel log (NVRM API mismatch)'
    last_load, unloaded_after = parsed.last_load()
    if version is None and last_load is not None and not unloaded_after:
        version, source = last_load['version'], 'kernel log (NVRM loading banner)'
    # modinfo reads the module FILE on disk: it is module_file_version, never the loaded module (a host that has
    # installed a driver but not rebooted has a file and no loaded module).
    if last_load is not None and unloaded_after:
        notes.append('the kernel log shows the NVIDIA stack unloaded after loading %s' % last_load['version'])
    verdict.kernel_module_version, verdict.kernel_module_source = version, source


def _flavor(parsed, verdict, hint):
    """Open or proprietary: /proc, the loading banner, the license lines, modinfo of the loaded file, the branch, the hint."""
    version = verdict.kernel_module_version
    flavor, source = None, None
    if parsed.proc and parsed.proc['flavor']:
        flavor, source = parsed.proc['flavor'], PROC_VERSION_PATH
    if flavor is None:
        for event in reversed(parsed.events):
            if event['kind'] == 'load' and event['flavor'] and (version is None or event['version'] == version):
                flavor, source = event['flavor'], 'kernel log (NVRM loading banner)'
                break
    kinds = set(event['kind'] for event in parsed.events)
    if flavor is None and 'taint_nvidia' in kinds:
        flavor, source = 'proprietary', "kernel log (module license 'NVIDIA' taints kernel)"
    if flavor is None and 'license_open' in kinds:
        flavor, source = 'open', "kernel log (module license 'Dual MIT/GPL')"
    # The file's license is the loaded module's flavor only when the file is the loaded version.
    modinfo = parsed.modinfo
    if flavor is None and modinfo['license'] and version is not None and modinfo['version'] in (None, version):
        flavor = flavor_from_license(modinfo['license'])
        source = 'modinfo license' if flavor else None
    branch = major(version)
    if flavor is None and branch is not None and 100 <= branch < OPEN_MODULE_FIRST_BRANCH:
        flavor, source = 'proprietary', 'branch %d has no open kernel module (open modules start at R515)' % branch
    if flavor is None and hint in ('open', 'proprietary'):
        flavor, source = hint, 'flavor option'
    elif flavor and hint in ('open', 'proprietary') and hint != flavor:
        verdict.notes.append('the flavor option says %s but the loaded module is %s' % (hint, flavor))
    verdict.kernel_module_flavor, verdict.kernel_module_flavor_source = flavor, source


def _findings(parsed):
    """Messages that look like drift but are something else, reported as what they are."""
    findings = []
    if parsed.smi['smi_binary_mismatch']:
        findings.append({'kind': 'nvidia-smi-vs-nvml', 'message': 'the nvidia-smi binary and libnvidia-ml disagree (an nvidia-smi from another driver, '
                         'or an interposed libnvidia-ml); this is not kernel/user-space drift'})
    if parsed.smi['no_driver'] or parsed.query['no_driver']:
        findings.append({'kind': 'no-driver',
                         'message': 'nvidia-smi could not talk to the NVIDIA kernel driver (module not loaded or no /dev/nvidia* in this namespace)'})
    for source in (parsed.smi, parsed.query):
        if source['nvml_error']:
            findings.append({'kind': 'nvml-error', 'message': 'NVML failed: %s' % source['nvml_error']})
    for event in parsed.events:
        if event['kind'] == 'modeset_mismatch':
            findings.append({'kind': 'modeset-vs-nvidia-ko', 'message': 'nvidia-modeset.ko %s does not match nvidia.ko %s: a kernel-side build problem '
                             '(rebuild/reinstall the kernel modules), not user-space drift' % (event['modeset_ko'], event['nvidia_ko'])})
        elif event['kind'] == 'gsp_mismatch':
            findings.append({'kind': 'gsp-firmware-mismatch', 'message': 'GSP firmware %s does not match the kernel module %s: a kernel-side '
                             'firmware package problem, not user-space drift' % (event['got'], event['expected'])})
        elif event['kind'] == 'gsp_missing':
            findings.append({'kind': 'gsp-firmware-missing', 'message': 'GSP firmware nvidia/%s/%s is missing: install the firmware package '
                             'matching the kernel module' % (event['version'], event['file'])})
    return findings


def _packages(parsed, verdict):
    """Sort the installed packages into user space (counted) and the rest (excluded, with why)."""
    parts = []
    module_major = major(verdict.kernel_module_version)
    for pkg in parsed.dpkg + parsed.rpm + parsed.pacman:
        kind = classify_package(pkg)
        if kind == 'userspace' and pkg['name'].startswith('nvidia-l4t-') and module_major is not None and module_major >= 100:
            # Jetson from L4T R36 on: the module reports a driver version (540.4.0), the L4T packages the
            # release (36.4.3): two numbering schemes that cannot be compared.
            kind = 'l4t-release'
        if kind == 'userspace':
            verdict.package_records.append(pkg)
            parts.append((pkg['upstream'], 'package %s' % pkg['name'], False))
        elif kind != 'unrelated':
            verdict.excluded_packages.append({'name': pkg['name'], 'version': pkg['version'], 'reason': kind})
    return parts


def _userspace(parsed, verdict):
    """Every user-space part: packages, library files, nvidia-smi, NVRM API-mismatch clients, NVML."""
    parts = _packages(parsed, verdict)
    for name, versions in sorted(parsed.libraries.items()):
        verdict.libraries[name] = versions[0] if len(versions) == 1 else ', '.join(versions)
        parts.extend((version, 'library %s' % name, False) for version in versions)
    if parsed.smi['smi_version']:
        parts.append((parsed.smi['smi_version'], 'nvidia-smi', False))
    relevant_api = []
    module = verdict.kernel_module_version
    for index, event in enumerate(parsed.events):
        if event['kind'] != 'api_mismatch':
            continue
        if index < parsed.last_load_index:
            verdict.notes.append('ignored an NVRM API mismatch logged before the module was loaded again (%s)'
                                 % parsed.events[parsed.last_load_index]['version'])
            continue
        if module and event['module'] != module:
            verdict.notes.append('ignored an older NVRM API mismatch against module %s (loaded: %s)' % (event['module'], module))
            continue
        relevant_api.append(event)
        who = 'NVRM client %s' % ("'%s'" % event['client_name'] if event['client_name'] else '')
        parts.append((event['client'], who.strip(), False))
    if parsed.nvml_version:
        parts.append((parsed.nvml_version, 'NVML library', True))
    nvml_answered = bool(parsed.smi['driver_version'] or parsed.query_versions)
    if nvml_answered and not parsed.nvml_mismatch:
        parts.append((parsed.smi['driver_version'] or parsed.query_versions[0], 'NVML (answered)', False))
    verdict.userspace_parts = [{'component': component, 'version': version, 'nvml': nvml} for version, component, nvml in parts]
    verdict.userspace_versions = sorted(distinct_userspace(parts), key=version_key)
    return relevant_api, nvml_answered


def distinct_userspace(parts):
    """Distinct user-space versions of ``(version, component, nvml)`` parts, an NVML major.minor folded into a full version it prefixes."""
    fulls = set(version for version, dummy, nvml in parts if not nvml)
    distinct = set(fulls)
    for version, dummy, nvml in parts:
        if nvml and not any(version_consistent(version, full, nvml=True) for full in fulls):
            distinct.add(version)
    return distinct


def _match(parsed, verdict, relevant_api, nvml_answered):
    """``match``: True when every part equals the module, False on any difference, None when unproven."""
    module = verdict.kernel_module_version
    parts = [(part['version'], part['component'], part['nvml']) for part in verdict.userspace_parts]
    mismatches, reported = [], set()
    if module:
        for version, component, nvml in parts:
            if not version_consistent(version, module, nvml=nvml) and (component, version) not in reported:
                reported.add((component, version))
                mismatches.append({'component': component, 'version': version, 'expected': module})
    distinct = distinct_userspace(parts)
    if parsed.nvml_mismatch and not any(item['component'].startswith('NVML') for item in mismatches):
        mismatches.append({'component': 'NVML library', 'version': parsed.nvml_version, 'expected': module,
                           'message': 'Failed to initialize NVML: Driver/library version mismatch'})
    if len(distinct) > 1 and not module:
        for version in sorted(distinct, key=version_key):
            mismatches.append({'component': 'user space', 'version': version, 'expected': None,
                               'message': 'user-space parts disagree: %s' % ', '.join(sorted(distinct, key=version_key))})
    if mismatches or relevant_api or parsed.nvml_mismatch or len(distinct) > 1:
        verdict.match = False
    elif nvml_answered or (module and parts):
        verdict.match = True
    verdict.mismatches = mismatches


def _context(parsed, verdict, evidence):
    """Distribution family, container, package manager."""
    family = parse_os_release(evidence.get('os_release'))['family'] if evidence.get('os_release') else None
    if family is None:
        family = evidence.get('distro_family')
    if family is None and parsed.dpkg:
        family = 'debian'
    if family is None and parsed.rpm:
        family = 'redhat'
    verdict.distro_family = family
    verdict.in_container = evidence.get('in_container')
    if evidence.get('container_files') is not None:
        verdict.in_container, verdict.container_kind, dummy = detect_container(evidence['container_files'])
    verdict.package_manager = 'apt' if parsed.dpkg else ('dnf' if parsed.rpm else None)


def recommend(verdict, module_loaded):
    """What the right fix is: ``none``, ``install_userspace``, ``reboot`` or ``load_module``."""
    if verdict.match is not False:
        return 'none' if module_loaded or verdict.kernel_module_version else 'load_module'
    if verdict.in_container:
        return 'install_userspace'
    if verdict.module_file_version and verdict.module_file_version == verdict.kernel_module_version:
        # The module on disk is the loaded one: user space moved on its own.
        return 'install_userspace'
    return 'reboot'


def describe(verdict, action, pins=(), skipped=()):
    """One message: what differs and what the fix is (``pins``/``skipped``: the fix plan, when there is one)."""
    module = verdict.kernel_module_version
    parts = []
    if verdict.match is False:
        differing = ['%s %s' % (item['component'], item['version']) for item in verdict.mismatches if item.get('version')]
        parts.append('NVIDIA driver drift: kernel module %s (from %s) but user space has %s'
                     % (module or 'unknown', verdict.kernel_module_source or 'no source', ', '.join(differing) or ', '.join(verdict.userspace_versions)))
        if action == 'install_userspace':
            if pins:
                parts.append('fix=true installs %s and holds them' % ' '.join(pins))
            else:
                parts.append('install user-space packages of version %s (no exact pin could be derived: %s)'
                             % (module or 'matching the host module', '; '.join(item['reason'] for item in skipped) or 'no package listing'))
        elif action == 'reboot':
            parts.append('on this bare host the installed driver (%s) is newer than the loaded module; reboot, or reload the module when nothing '
                         'uses the GPU (%s)' % (', '.join(verdict.userspace_versions), MODULE_RELOAD_HINT))
    elif verdict.match is None:
        if not module:
            parts.append('no NVIDIA kernel module is loaded (%s and %s are absent)' % (PROC_VERSION_PATH, SYS_MODULE_PATH))
        else:
            parts.append('kernel module %s is loaded but no user-space driver version was found (no packages, library files or nvidia-smi)' % module)
    else:
        parts.append('kernel module and user space agree on %s' % module)
    parts.extend(finding['message'] for finding in verdict.findings)
    return '; '.join(parts)


def render_state(kernel, userspace, packages):
    """The diff text of a driver state: module, user-space versions, one line per package."""
    lines = ['kernel module: %s' % (kernel or 'none'), 'user space: %s' % (', '.join(userspace) or 'none')]
    lines.extend('package %s %s' % (pkg['name'], pkg['version']) for pkg in packages)
    return '\n'.join(lines) + '\n'
