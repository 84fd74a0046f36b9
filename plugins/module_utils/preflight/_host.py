# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the SGLang pre-flight observes on the host and the cleanup it may do there.

Observing: the unit (systemctl show), the service user, the GPU device nodes, nvidia-smi's compute apps, the NVIDIA
driver evidence that llmops.sglang.nvidia_driver_match reads, the interpreter's installed distributions (SGLang,
torch, the CUDA runtime wheel; read from files, nothing imported), the model and the disks. Acting (only with cleanup,
never in check mode): stopping orphans and removing leaked shared memory. Standard library only (Python 3.9+).
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd

from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _cuda_compat as cc
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _gpu_holders as gh
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _gpu_health as gpu_health
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _model_disk as md
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._evidence import EvidenceReader, parse_nvidia_smi
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._host import HostCommands
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._verdict import evaluate
from ansible_collections.llmops.sglang.plugins.module_utils.host._procfs import read_processes
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _ports as pt
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _checks as pf
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _proc_stop as ps
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _shm_leaks as sl
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner
from ansible_collections.llmops.sglang.plugins.module_utils.deploy._stamp import file_digest
from ansible_collections.llmops.sglang.plugins.module_utils.host._systemd import SystemdError, show
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._install import MARKER, read_version
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._sm120_patch import PATCH_FILES

SYS_PATH_SNIPPET = 'import json, sys; print(json.dumps([p for p in sys.path[1:] if p]))'


SYSTEM_DIRS = ['/usr/sbin', '/sbin', '/usr/bin', '/bin']


class PreflightHost:
    """Runs commands and reads the host's files: through an AnsibleModule (:meth:`of_module`), or with a plain runner
    and ``which`` for code that runs on the host without one (the guard's release check after its own stop)."""

    def __init__(self, run, which, module=None):
        self.module = module
        self.commands = []
        self._run = run
        self._which = which

    @classmethod
    def of_module(cls, module):
        return cls(module_runner(module), lambda name: module.get_bin_path(name, opt_dirs=SYSTEM_DIRS), module)

    def run(self, argv, data=None):
        rc, out, err = self._run(argv, data)
        self.commands.append({'argv': list(argv), 'rc': rc})
        return rc, out, err

    def unit_state(self, unit):
        """{'active', 'user'} of the unit (User= of its file); inactive and no user when systemd does not know it."""
        systemctl = self.which('systemctl')
        if not systemctl or not unit:
            return {'active': False, 'user': None}
        try:
            props = show(unit, ('ActiveState', 'User'), self.run, systemctl)
        except SystemdError:
            props = {}
        return {'active': props.get('ActiveState') in ('active', 'activating', 'reloading', 'deactivating'),
                'user': props.get('User') or None}

    def which(self, name):
        """The path of a tool (the system directories searched too), or None."""
        return self._which(name)

    @staticmethod
    def uid_of(user):
        try:
            return pwd.getpwnam(user).pw_uid if user else None
        except KeyError:
            return None

    def nvidia_smi(self):
        """(header text, {uuid: index}, compute apps {pid: [(gpu, MiB)]}); empty when nvidia-smi is missing or fails."""
        smi = self.which('nvidia-smi')
        if not smi:
            return '', {}, {}
        rc, header, err = self.run([smi])
        header = (header or '') + (err or '')
        rc, out, dummy = self.run([smi, '--query-gpu=index,uuid', '--format=csv,noheader'])
        uuids = gh.parse_gpu_uuids(out) if rc == 0 else {}
        rc, out, dummy = self.run([smi, '--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader,nounits'])
        apps = gh.parse_compute_apps(out, uuids) if rc == 0 else {}
        return header, uuids, apps

    def driver(self, smi_header):
        """The loaded driver (nvidia_driver_match's evidence and verdict) and the CUDA version nvidia-smi reports."""
        evidence = EvidenceReader(HostCommands(self.module)).gather()
        evidence['nvidia_smi'] = smi_header or None
        verdict = evaluate(evidence)
        version = verdict.kernel_module_version
        mismatches = ['%s %s' % (item.get('component'), item.get('version')) for item in verdict.mismatches]
        return {'version': version, 'branch': version.split('.')[0] if version else None, 'match': verdict.match,
                'userspace': verdict.userspace_versions, 'mismatches': mismatches,
                'source': verdict.kernel_module_source, 'cuda': parse_nvidia_smi(smi_header)['cuda_version']}

    def site_dirs(self, python):
        """The interpreter's sys.path entries (its site-packages), or [] when it cannot run."""
        if not python or not os.path.exists(python):
            return []
        rc, out, dummy = self.run([python, '-c', SYS_PATH_SNIPPET])
        try:
            return [path for path in json.loads(out.strip().splitlines()[-1]) if os.path.isdir(path)] if rc == 0 else []
        except (ValueError, IndexError):
            return []


def sglang_facts(site_dirs):
    """{'version', 'path', 'sm120_patch'} of the sglang package in SITE_DIRS; the patch state is a digest of the files the
    SM120 patcher edits (two ranks with the same version and digest run the same patched code)."""
    for site in site_dirs:
        package = os.path.join(site, 'sglang')
        if os.path.isfile(os.path.join(package, MARKER)):
            digest = hashlib.sha256()
            for rel in PATCH_FILES:
                digest.update(('%s\0%s\n' % (rel, file_digest(os.path.join(package, rel)))).encode('utf-8'))
            return {'version': read_version(package)[0], 'path': package, 'sm120_patch': digest.hexdigest()[:16]}
    return {'version': None, 'path': None, 'sm120_patch': None}


def _pick_gpus(params, smi_uuids):
    """{index: path} of the server's GPU device nodes: the gpu_devices option, else the host's filtered by
    CUDA_VISIBLE_DEVICES of the server's environment."""
    if params['gpu_devices']:
        return dict((gh.gpu_index(path) if gh.gpu_index(path) is not None else n, path) for n, path in enumerate(params['gpu_devices']))
    return gh.visible_gpus((params['environment'] or {}).get('CUDA_VISIBLE_DEVICES'), gh.discover_gpu_devices(), smi_uuids)


def _classify_all(procs, pids, context):
    classified = {}
    for pid in pids:
        kind, reason = gh.classify(procs[pid], procs, context['unit'], context['active'], context['uid'])
        proc = procs[pid]
        where = ', unit ' + proc.unit if proc.unit else ''
        classified[pid] = (kind, reason, 'pid %d %s (user %s%s)' % (pid, proc.title, proc.user, where))
    return classified


def check_all(host, params, check_mode, procs, context):
    """Every asked check on PROCS; returns (checks, pids to stop, leaks to remove, rank facts)."""
    asked = params['checks']
    checks, stop, leaks = [], set(), []
    smi_header, uuids, apps = host.nvidia_smi() if ('gpus' in asked or 'driver' in asked) else ('', {}, {})
    if 'gpus' in asked:
        gpus = _pick_gpus(params, uuids)
        holders = gh.find_holders(procs, gpus, context['unit'], context['active'], context['uid'], apps, params['shared_devices'])
        check, orphans = pf.decide_gpus(holders, gpus, params['cleanup'], check_mode, params['unit_stopped'])
        checks.append(check)
        stop.update(orphans)
    if 'ports' in asked:
        ports = pt.server_ports(params['server_args'])
        listeners = [entry for entry in pt.read_listeners() if entry['port'] in [p['port'] for p in ports]]
        owners = pt.listener_pids(listeners, procs)
        classified = _classify_all(procs, sorted(set(pid for pids in owners.values() for pid in pids)), context)
        check, orphans = pf.decide_ports(ports, listeners, owners, classified, params['cleanup'], check_mode)
        checks.append(check)
        stop.update(orphans)
    sites = host.site_dirs(params['python'])
    build = cc.torch_build(sites)
    driver = host.driver(smi_header) if 'driver' in asked else {'version': None, 'branch': None, 'cuda': None}
    if 'driver' in asked:
        checks.append(pf.decide_driver(driver, build or {}, cc.verdict(driver['version'], driver['cuda'], build)))
    if 'shm' in asked:
        leaks = sl.find_leaks(params['shm_dir'], procs, context['uid'])
        checks.append(pf.decide_shm(leaks, params['cleanup'], check_mode))
    model = md.model_of(params['server_args'], params['working_directory'])
    cache = md.hub_cache(params['environment'])
    cached = md.cached_revision(cache, model['model'], model['revision']) if model['kind'] == 'hub' else (None, None)
    if 'disk' in asked:
        model['path_exists'] = bool(model['path']) and os.path.exists(model['path'])
        spaces = md.free_space([model['path'] or cache, cache, params['working_directory']])
        checks.append(pf.decide_disk(model, cache, md.offline(params['environment']), cached, spaces, params['min_free_gb']))
    if 'gpu_health' in asked:
        inputs = gpu_health.read_inputs(host.run, host.which, params.get('kernel_log'), params.get('nvidia_smi'), params.get('dcgm_diag', True))
        wanted = gpu_health.wanted_gpus(params['environment'], params['gpu_devices'], params['server_args'])
        checks.append(gpu_health.decide(inputs, wanted, params.get('gpu_health') or 'fail'))
    sglang = sglang_facts(sites)
    rank = {'sglang_version': sglang['version'], 'sm120_patch': sglang['sm120_patch'], 'torch': (build or {}).get('torch'),
            'torch_cuda': (build or {}).get('cuda'), 'driver_branch': driver.get('branch'),
            'model_revision': cached[0] or (md.local_revision(model['path']) if model['path'] else None) or model['revision']}
    return checks, sorted(stop), leaks, rank


def cleanup(params, procs, stop_pids, leaks, uid):
    """Stop the orphans and remove the leaked files; returns (stopped entries, removed paths)."""
    stopped = ps.stop([procs[pid] for pid in stop_pids if pid in procs], term_timeout=params['stop_timeout'])
    removed = sl.remove(leaks, uid)
    return stopped, removed


def verify(checks, stopped, removed, leaks):
    """After a cleanup: a process that survived SIGKILL or a file that could not be removed fails its check."""
    by_name = dict((check.name, check) for check in checks)
    alive = [entry for entry in stopped if not entry['stopped']]
    for entry in alive:
        for name in ('gpus', 'ports'):
            if name in by_name and by_name[name].status == pf.CLEANED:
                by_name[name].status = pf.FAILED
                by_name[name].problems.append('orphan pid %d %s survived SIGTERM and SIGKILL (%s). Stop it by hand.'
                                              % (entry['pid'], entry['title'], entry['error'] or 'still running'))
    left = [leak['path'] for leak in leaks if leak['path'] not in removed]
    if left and 'shm' in by_name:
        by_name['shm'].status = pf.FAILED
        by_name['shm'].problems.append('could not remove %s. Remove them by hand.' % ', '.join(left))


def gpu_check_options():
    """The argument_spec of the GPU holder check, for sglang_preflight and sglang_restart alike (one place for the
    defaults a restart's release check and a pre-flight must agree on); a new dict each call."""
    return dict(
        unit=dict(type='str', default='sglang.service'),
        user=dict(type='str'),
        environment=dict(type='dict', default={}),
        gpu_devices=dict(type='list', elements='path', default=[]),
        shared_devices=dict(type='list', elements='path', default=list(gh.SHARED_DEVICES)),
        cleanup=dict(type='bool', default=False),
        stop_timeout=dict(type='float', default=10.0),
    )


def release_params(params):
    """preflight()'s parameters for the check after a stop that the unit released its GPUs: the GPU check options of
    ``params``, the GPU check alone, every other check's input empty."""
    release = dict((name, params[name]) for name in gpu_check_options())
    release.update(checks=['gpus'], unit_stopped=True, server_args={}, python=None, working_directory='/',
                   shm_dir='/dev/shm', min_free_gb=0.0)
    return release


def preflight(module, params):
    """The whole pre-flight on this host (observe, decide, clean up unless in check mode, verify) as the module's
    result; ``ok`` is False when a check failed. The sglang_preflight module and the restart's GPU release check
    (sglang_restart) both run it."""
    return run_preflight(PreflightHost.of_module(module), params, module.check_mode, module.warn,
                         module._diff)  # pylint: disable=protected-access


def run_preflight(host, params, check_mode=False, warn=None, diff=False):
    """:func:`preflight` on a :class:`PreflightHost`; ``warn`` takes each warning (None: dropped)."""
    warn = warn or (lambda message: None)
    unit = host.unit_state(params['unit'])
    user = params['user'] or unit['user']
    context = {'unit': params['unit'], 'active': unit['active'], 'uid': host.uid_of(user)}
    procs = read_processes(skip=(os.getpid(),))
    checks, stop_pids, leaks, rank = check_all(host, params, check_mode, procs, context)
    acting = params['cleanup'] and bool(stop_pids or leaks)
    stopped, removed = [], []
    if acting and not check_mode:
        stopped, removed = cleanup(params, procs, stop_pids, leaks, context['uid'])
        verify(checks, stopped, removed, leaks)
    elif acting:
        stopped = [{'pid': pid, 'title': procs[pid].title, 'user': procs[pid].user, 'signal': None, 'stopped': False, 'error': None}
                   for pid in stop_pids]
        removed = [leak['path'] for leak in leaks]
    failed = [check.name for check in checks if check.status == pf.FAILED]
    message = pf.failure_message(checks, params['unit']) if failed else 'pre-flight for %s ok' % params['unit']
    for check in checks:
        if check.status == pf.WARNING:
            for problem in check.problems:
                warn('pre-flight %s (a warning, the start goes on): %s' % (check.name, problem))
        for warning in check.details.get('warnings') or []:
            warn('pre-flight %s: %s' % (check.name, warning))
    result = dict(changed=acting, ok=not failed, msg=message, summary=pf.summary_line(checks), failed_checks=failed,
                  checks=dict((check.name, check.to_json()) for check in checks), stopped=stopped, removed=removed,
                  rank=rank, unit_active=unit['active'], commands=host.commands)
    if diff and acting:
        result['diff'] = dict(before=''.join('process %s\n' % entry['pid'] for entry in stopped) + ''.join('file %s\n' % leak['path'] for leak in leaks),
                              after='', before_header='orphans and leaked shared memory of %s' % params['unit'], after_header='after cleanup')
    return result
