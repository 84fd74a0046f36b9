# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The deployment record of an SGLang unit: what a successful deployment left on the host.

A record holds a digest per input of the deployment (computed on the controller: variables, role files), the
sha256, mode and owner of every file the deployment manages (mode and owner for directories), a digest of the
installed ``sglang`` package (the environment's distributions, sglang's dist-info and the content of the
SM120-patched sources: catches pip installs, up/downgrades, patches and reverts) and the unit's InvocationID.

``compare()`` tells whether the host still runs exactly the recorded deployment and, if not, every reason
why; a deploy can then skip installing and configuring when nothing differs. Standard library only: runs on
the target with Python 3.9+.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import NoSpaceError, write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import StateFormatError, StateReadError, read_state

FORMAT = 2

# systemctl show properties compared for the unit.
UNIT_PROPERTIES = ('ActiveState', 'SubState', 'UnitFileState', 'NeedDaemonReload', 'InvocationID', 'MainPID')


class StampError(Exception):
    """A record that cannot be read or written; ``msg`` says what and what to do; ``no_space``: NoSpaceError.to_json()
    when its file system is full."""

    def __init__(self, msg, no_space=None):
        super().__init__(msg)
        self.msg = msg
        self.no_space = no_space


def file_digest(path):
    """sha256 hex digest of the file at ``path``; None when it does not exist.

    Raises StampError when the file exists but cannot be read.
    """
    digest = hashlib.sha256()
    try:
        with open(path, 'rb') as handle:
            for block in iter(lambda: handle.read(1 << 20), b''):
                digest.update(block)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise StampError('Cannot read %s to record or compare it: %s. Run the task as root (become: true).' % (path, err))
    return digest.hexdigest()


def file_state(path):
    """What the record keeps of a managed path: ``{'sha256', 'mode', 'uid', 'gid'}`` for a file (``sha256`` None for a
    directory), None when the path does not exist. Mode is the permission bits as an octal string (``'0600'``).

    Raises StampError when the path exists but cannot be read.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise StampError('Cannot read %s to record or compare it: %s. Run the task as root (become: true).' % (path, err))
    return {'sha256': None if os.path.isdir(path) else file_digest(path), 'mode': '%04o' % (st.st_mode & 0o7777),
            'uid': st.st_uid, 'gid': st.st_gid}


def install_digest(package_dir, watched=()):
    """Digest of what a deploy controls in an installed ``sglang`` package: which distributions the environment has
    (the ``*.dist-info`` names beside the package: name and version of each), the files of sglang's own dist-info
    (path, size and mtime: any pip install, reinstall or removal rewrites them) and the content (sha256) of the
    ``watched`` source files (paths relative to ``package_dir``; the SM120 patch sites).

    Returns ``(hexdigest, number_of_entries)``. A few dozen stat calls and reads of a few hundred KiB; unlike a walk
    of SGLang's ~3300 files, it costs about a millisecond.
    """
    site = os.path.dirname(os.path.abspath(package_dir))
    digest = hashlib.sha256()
    count = 0
    try:
        dists = sorted(name for name in os.listdir(site) if name.endswith('.dist-info'))
    except OSError:
        dists = []
    for name in dists:
        digest.update(('dist\0%s\n' % name).encode('utf-8', 'surrogateescape'))
        count += 1
        if not name.lower().startswith('sglang-'):
            continue
        for root, dirs, files in os.walk(os.path.join(site, name)):
            dirs.sort()
            for entry in sorted(files):
                path = os.path.join(root, entry)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                digest.update(('meta\0%s\0%d\0%d\n' % (os.path.relpath(path, site), st.st_size, st.st_mtime_ns)).encode('utf-8', 'surrogateescape'))
                count += 1
    for rel in sorted(watched):
        digest.update(('src\0%s\0%s\n' % (rel, file_digest(os.path.join(package_dir, rel)))).encode('utf-8', 'surrogateescape'))
        count += 1
    return digest.hexdigest(), count


def build(inputs, files, sglang=None, unit=None, now=None):
    """The record to write.

    ``inputs``: ``{name: digest}`` of everything the deployment was made from (opaque strings, compared by name).
    ``files``: paths the deployment manages (absent ones are recorded as absent).
    ``sglang``: ``{'path', 'version', 'tree', 'files'}`` of the installed package, or None.
    ``unit``: ``{'name', 'invocation'}``, or None.
    """
    return {
        'format': FORMAT,
        'inputs': dict(inputs),
        'files': {path: file_state(path) for path in sorted(set(files))},
        'sglang': sglang,
        'unit': unit,
        'recorded_at': (now or datetime.datetime.now(datetime.timezone.utc)).strftime('%Y-%m-%dT%H:%M:%SZ'),
    }


def same_record(old, new):
    """True when two records differ at most in their time of recording."""
    if not isinstance(old, dict):
        return False
    return _without_time(old) == _without_time(new)


def _without_time(record):
    return {k: v for k, v in record.items() if k != 'recorded_at'}


def read(path, check_mode=False):
    """The record at ``path``; None when there is none. Raises StampError for an unreadable one.

    A damaged record (host/_state_file: not JSON, too large, not of the shape build() writes) is set aside (not in
    check mode) and comes back as ``{'format': None, 'damaged': Damage.to_json()}``: it only costs one full deploy,
    compare() names it and the deploy writes a new one.
    """
    try:
        record, damage = read_state(path, _well_formed, check_mode=check_mode)
    except StateReadError as err:
        raise StampError('Cannot read the deployment record %s: %s' % (path, err.msg))
    return {'format': None, 'damaged': damage.to_json()} if damage else record


def _well_formed(record):
    """``record`` when it has the shape build() writes (any format): the types compare() relies on."""
    if not isinstance(record, dict):
        raise StateFormatError('not a mapping')
    if 'format' not in record:
        raise StateFormatError('no format')
    if record.get('format') != FORMAT:
        return record
    files = record.get('files')
    for name, kind in (('inputs', dict), ('files', dict), ('sglang', (dict, type(None))), ('unit', (dict, type(None)))):
        if not isinstance(record.get(name), kind):
            raise StateFormatError('%s is not %s' % (name, 'a mapping' if kind is dict else 'a mapping or null'))
    for path, state in files.items():
        if state is not None and not (isinstance(state, dict) and set(state) == {'sha256', 'mode', 'uid', 'gid'}):
            raise StateFormatError('files[%r] is not a file state' % path)
    return record


def write(path, record):
    """Write ``record`` to ``path`` atomically (temporary file in the same directory, then rename), mode 0600.

    Raises StampError when the directory is missing or not writable; the old record is then left as it was.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise StampError('Cannot write the deployment record in %s: no such directory. Create the directory first (the '
                         'sglang_service role writes it in sglang_service_working_directory).' % directory)
    try:
        # the temporary file is created 0600, and os.replace keeps that mode
        write_atomic(path, (json.dumps(record, indent=1, sort_keys=True) + '\n').encode('utf-8'), os.replace)
    except NoSpaceError as err:
        raise StampError('Cannot write the deployment record: %s' % err.strerror, no_space=err.to_json())
    except OSError as err:
        raise StampError('Cannot write the deployment record %s: %s' % (path, err))


def _owner(state):
    return '%s %d:%d' % (state['mode'], state['uid'], state['gid'])


def compare(record, inputs, files, sglang=None, unit_state=None, health=None):
    """Why the host no longer runs the recorded deployment: ``(reasons, unit_changed)``.

    ``reasons`` is a list of sentences, empty when the host still runs it. ``unit_changed`` is True when the unit
    itself is not the recorded run (not active, or another invocation): a multi-node deployment must then restart
    every rank. ``record``: from read(). ``inputs``/``files``/``sglang``: as for build(), for now.
    ``unit_state``: ``_systemd.show()`` of the unit now, or None when no unit is checked.
    ``health``: ``sglang._probe.http_get()`` result of GET /health now, or None when not probed.
    """
    if record is None:
        return ['no deployment record yet'], False
    if record.get('damaged'):
        damage = record['damaged']
        kept = ('kept as %s' % damage['kept_as']) if damage.get('kept_as') else 'left in place in check mode'
        return ['the deployment record was damaged (%s; %s)' % (damage['why'], kept)], False
    if record.get('format') != FORMAT:
        return ['the deployment record has format %r, this collection writes %d' % (record.get('format'), FORMAT)], False
    reasons = []
    recorded_inputs = record['inputs']
    changed = sorted(name for name in set(recorded_inputs) | set(inputs) if recorded_inputs.get(name) != inputs.get(name))
    if changed:
        reasons.append('inputs changed: %s' % ', '.join(changed))
    reasons.extend(what_runs_reasons(record, files, sglang))
    unit_changed = False
    if unit_state is not None:
        unit = record.get('unit') or {}
        name = unit.get('name', 'the unit')
        active = unit_state.get('ActiveState', '')
        if active != 'active':
            reasons.append('%s is %s (%s), not active' % (name, active or 'unknown', unit_state.get('SubState', '?')))
            unit_changed = True
        if unit_state.get('UnitFileState', '') != 'enabled':
            reasons.append('%s is %s, not enabled' % (name, unit_state.get('UnitFileState', '') or 'not installed'))
        if unit_state.get('NeedDaemonReload', 'no') == 'yes':
            reasons.append('%s has a daemon-reload pending (its unit file changed on disk)' % name)
        recorded_invocation = unit.get('invocation')
        if recorded_invocation and unit_state.get('InvocationID') != recorded_invocation:
            reasons.append('%s was restarted since the deployment (InvocationID %s, recorded %s)'
                           % (name, unit_state.get('InvocationID') or 'none', recorded_invocation))
            unit_changed = True
    if health is not None and health.get('status') != 200:
        reasons.append('GET %s answered %s' % (health.get('url'), health.get('status') or health.get('error') or 'nothing'))
    return reasons, unit_changed


def restore_reasons(record, files, sglang, unit_state):
    """Why ``record`` cannot be written again for the unit's new run after a rollback restored the recorded deployment
    (its files, SGLang and patch state put back, the unit restarted and proven ready): empty when it can. The record
    must be valid, what the host runs (its managed files, SGLang) must be what it recorded, and the unit active. Then
    only the unit's InvocationID (and the time) of the record change: its inputs stay those of the restored deployment.
    """
    if record is None:
        return ['no deployment record of the restored configuration']
    if record.get('damaged') or record.get('format') != FORMAT:
        return ['the deployment record of the restored configuration is damaged or of another format']
    reasons = what_runs_reasons(record, files, sglang)
    if unit_state is not None and unit_state.get('ActiveState', '') != 'active':
        reasons.append('%s is %s, not active' % ((record.get('unit') or {}).get('name', 'the unit'),
                                                 unit_state.get('ActiveState', '') or 'unknown'))
    return reasons


def what_runs_reasons(record, files, sglang):
    """The differences in what the server process runs: its managed files and the SGLang installation (a valid record)."""
    reasons = []
    recorded_files = record['files']
    wanted = sorted(set(files))
    if sorted(recorded_files) != wanted:
        reasons.append('the set of managed files changed (%s)' % ', '.join(sorted(set(recorded_files) ^ set(wanted))))
    for path in wanted:
        if path not in recorded_files:
            continue
        now, before = file_state(path), recorded_files[path]
        if now == before:
            continue
        if now is None:
            reasons.append('%s was removed' % path)
        elif before is None:
            reasons.append('%s appeared' % path)
        elif now['sha256'] != before['sha256']:
            reasons.append('%s was changed on the host' % path)
        else:
            reasons.append('mode or owner of %s changed on the host (%s, recorded %s)' % (path, _owner(now), _owner(before)))
    recorded_sglang = record.get('sglang')
    if (recorded_sglang is None) != (sglang is None):
        reasons.append('SGLang was %s' % ('installed' if sglang else 'removed'))
    elif sglang is not None:
        if recorded_sglang.get('path') != sglang.get('path'):
            reasons.append('SGLang moved from %s to %s' % (recorded_sglang.get('path'), sglang.get('path')))
        elif recorded_sglang.get('version') != sglang.get('version'):
            reasons.append('SGLang %s was replaced by %s' % (recorded_sglang.get('version'), sglang.get('version')))
        elif recorded_sglang.get('tree') != sglang.get('tree'):
            reasons.append('the installation of SGLang %s at %s changed (an SM120-patched source, its dist-info or the installed '
                           'distributions beside it)' % (sglang.get('version'), sglang.get('path')))
    return reasons


def stale_process(record, files, sglang, unit_state):
    """True when the unit still runs the recorded start although what it runs changed since (its files, SGLang, or
    its unit file with a daemon-reload pending): the process predates the change, as after a run that wrote the new
    files and was killed before its restart. Reads only the managed files."""
    if not record or record.get('damaged') or record.get('format') != FORMAT or not unit_state:
        return False
    recorded_invocation = (record.get('unit') or {}).get('invocation')
    if unit_state.get('ActiveState') != 'active' or not recorded_invocation:
        return False
    if unit_state.get('InvocationID') != recorded_invocation:
        return False
    return bool(what_runs_reasons(record, files, sglang)) or unit_state.get('NeedDaemonReload', 'no') == 'yes'
