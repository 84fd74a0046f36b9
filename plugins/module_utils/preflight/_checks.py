# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Decisions of the SGLang pre-flight: one :class:`Check` per concern from what was observed, the processes and files
a cleanup may remove, the one-line summary and the failure message. Pure functions; the observing and acting is in
``preflight._host``. Standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _gpu_holders as gh

OK, FAILED, CLEANED, WOULD_CLEAN, UNKNOWN, WARNING = 'ok', 'failed', 'cleaned', 'would clean', 'unknown', 'warning'
# The checks the module runs on one host; the comparison of ranks runs on the controller (filter rank_differences).
CHECKS = ('gpus', 'ports', 'driver', 'shm', 'disk', 'gpu_health')
GIB = 1024 ** 3


@dataclass
class Check:
    """The outcome of one check: status, a short summary for the one-line report, and every problem in full."""

    name: str
    status: str = OK
    summary: str = ''
    problems: list = field(default_factory=list)
    details: dict = field(default_factory=dict)

    def to_json(self):
        return {'status': self.status, 'summary': self.summary, 'problems': list(self.problems), 'details': self.details}

    @classmethod
    def from_json(cls, name, data):
        return cls(name=name, status=data['status'], summary=data['summary'], problems=list(data['problems']),
                   details=dict(data['details']))


def _clean_status(check_mode):
    return WOULD_CLEAN if check_mode else CLEANED


def decide_gpus(holders, gpu_devices, cleanup, check_mode, unit_stopped=False):
    """Check of the GPU holders (``_gpu_holders.Holder``); orphans are to be stopped when CLEANUP is on."""
    check = Check('gpus', details={'holders': [holder.to_json() for holder in holders],
                                   'devices': dict((str(index), path) for index, path in sorted(gpu_devices.items()))})
    orphans = [holder for holder in holders if holder.kind == gh.ORPHAN]
    for holder in gh.blocking(holders):
        check.problems.append(
            'GPU %s is held by %s: %s. SGLang would run out of memory on it. Stop that process or give the server other GPUs '
            '(CUDA_VISIBLE_DEVICES); the pre-flight never stops a process that is not this server\'s own.'
            % (','.join(str(gpu) for gpu in holder.gpus), holder.describe(), holder.reason))
    if unit_stopped:
        for holder in [holder for holder in holders if holder.kind == gh.OWN]:
            check.problems.append('%s still holds GPU %s after the unit was stopped.' % (holder.describe(), holder.gpus))
    if orphans and not cleanup:
        check.problems.append(
            'orphans of an earlier run hold the GPUs: %s. Stop them (cleanup=true does: SIGTERM, then SIGKILL) before starting.'
            % '; '.join(holder.describe() for holder in orphans))
    if check.problems:
        check.status = FAILED
    elif orphans:
        check.status = _clean_status(check_mode)
    count = len(gpu_devices)
    others = [holder for holder in holders if holder.kind != gh.OWN]
    gpus = '%d GPU%s' % (count, '' if count == 1 else 's') if count else 'no GPU device'
    check.summary = '%s, %s' % (gpus, '%d other holder%s' % (len(others), '' if len(others) == 1 else 's') if others else 'no other holder')
    return check, [holder.pid for holder in orphans]


def decide_ports(ports, listeners, owners, classified, cleanup, check_mode):
    """Check of the server's ports. OWNERS: {inode: [pid]}; CLASSIFIED: {pid: (kind, reason, description)}."""
    check = Check('ports', details={'ports': []})
    orphans = []
    for wanted in ports:
        found = [entry for entry in listeners if entry['port'] == wanted['port']]
        entry = {'port': wanted['port'], 'flag': wanted['flag'], 'free': not found, 'holders': []}
        for listener in found:
            pids = owners.get(listener['inode'], [])
            if not pids:
                entry['holders'].append({'pid': None, 'kind': gh.FOREIGN, 'address': listener['address']})
                check.problems.append('port %d (%s) is in use on %s by a socket no process of this host shows. Free the port or '
                                      'set %s to another one.' % (wanted['port'], wanted['flag'], listener['address'], wanted['flag']))
            for pid in pids:
                kind, reason, description = classified[pid]
                entry['holders'].append({'pid': pid, 'kind': kind, 'address': listener['address'], 'reason': reason})
                if kind == gh.FOREIGN:
                    check.problems.append('port %d (%s) is held by %s: %s. Stop it or set %s to a free port.'
                                          % (wanted['port'], wanted['flag'], description, reason, wanted['flag']))
                elif kind == gh.ORPHAN:
                    orphans.append(pid)
        check.details['ports'].append(entry)
    if orphans and not cleanup:
        check.problems.append('orphans of an earlier run hold the ports: pids %s. Stop them (cleanup=true does).'
                              % ', '.join(str(pid) for pid in sorted(set(orphans))))
    check.status = FAILED if check.problems else (_clean_status(check_mode) if orphans else OK)
    check.summary = ','.join(str(entry['port']) for entry in ports) + (' free' if all(e['free'] for e in check.details['ports']) else '')
    return check, sorted(set(orphans))


def decide_driver(driver, build, verdict):
    """Check of driver drift and driver/torch CUDA: DRIVER from nvidia_driver_match's evidence, VERDICT (ok, text)."""
    check = Check('driver', details={'driver': driver, 'torch': build})
    version = driver.get('version')
    if driver.get('match') is False:
        check.problems.append('the loaded NVIDIA kernel module %s does not match the user-space driver %s (%s). CUDA fails '
                              'to initialise. Run llmops.sglang.nvidia_driver_match with fix=true or reboot into the installed driver.'
                              % (version, ', '.join(driver.get('userspace') or []) or '?', '; '.join(driver.get('mismatches') or [])))
    ok, text = verdict
    if ok is False:
        check.problems.append('%s. SGLang would fail only after loading the weights ("undefined symbol" or CUDA error 804).' % text)
    if check.problems:
        check.status = FAILED
    elif ok is None and not version:
        check.status = UNKNOWN
    check.summary = text if ok is not False else 'driver %s too old for torch CUDA %s' % (version, build.get('cuda'))
    if not version:
        check.summary = 'no NVIDIA driver found'
    return check


def decide_shm(leaks, cleanup, check_mode):
    check = Check('shm', details={'leaked': leaks})
    if leaks and not cleanup:
        check.status = FAILED
        check.problems.append('%d file(s) in /dev/shm left by an earlier run of the service user and held by no process: %s. '
                              'Remove them (cleanup=true does).' % (len(leaks), ', '.join(leak['path'] for leak in leaks[:10])))
    elif leaks:
        check.status = _clean_status(check_mode)
    semaphores = len([leak for leak in leaks if leak['kind'] == 'semaphore'])
    check.summary = ('%d leaked (%d semaphores)' % (len(leaks), semaphores)) if leaks else 'clean'
    return check


def decide_disk(model, cache, is_offline, cached, spaces, min_free_gb):
    """Check of the model and the free space. CACHED: (commit, snapshot) of a hub model in CACHE."""
    check = Check('disk', details={'model': model, 'hub_cache': cache, 'offline': is_offline, 'free': spaces,
                                   'min_free_gb': min_free_gb})
    if model['kind'] == 'local' and not model['path_exists']:
        check.problems.append('the model path %s does not exist on this host. Copy the model there or set --model-path to a '
                              'hub model id.' % model['path'])
    if model['kind'] == 'hub' and is_offline and not cached[0]:
        check.problems.append('the server runs offline (HF_HUB_OFFLINE) but %s%s is not in the hub cache %s. Download it '
                              'first (huggingface-cli download) or unset HF_HUB_OFFLINE.'
                              % (model['model'], '@' + model['revision'] if model['revision'] else '', cache))
    for space in spaces:
        if space['free_bytes'] < min_free_gb * GIB:
            check.problems.append('only %.1f GB free on the file system of %s (at least %s GB wanted for the model and the JIT '
                                  'caches). Free space or lower min_free_gb.' % (space['free_bytes'] / float(GIB), space['path'], min_free_gb))
    check.status = FAILED if check.problems else OK
    free = min([space['free_bytes'] for space in spaces] or [0]) / float(GIB)
    where = {'local': 'model on disk', 'hub': 'model cached' if cached[0] else 'model from the hub', 'none': 'no model'}[model['kind']]
    check.summary = '%.1f GB free, %s' % (free, where)
    return check


def summary_line(checks):
    """'gpus ok (2 GPUs, no other holder), ports ok (30000 free), ...' in CHECKS order."""
    return ', '.join('%s %s (%s)' % (check.name, check.status, check.summary) for check in checks)


def failure_message(checks, unit):
    failed = [check for check in checks if check.status == FAILED]
    problems = []
    for check in failed:
        problems += ['%s: %s' % (check.name, problem) for problem in check.problems]
    return 'pre-flight for %s failed (%s), nothing was started: %s' % (unit, ', '.join(check.name for check in failed), ' | '.join(problems))
