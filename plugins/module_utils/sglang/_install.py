# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where SGLang is installed on the target and which release it is, without importing it.

Importing SGLang needs its GPU stack (torch, CUDA, flashinfer), so the package is found with the target's
interpreter through ``importlib.util.find_spec`` (path finders only) and its version read from the dist-info
beside it with ``importlib.metadata``. Used by every module that works on an installed SGLang:
``sglang_patch_sm120``, ``sglang_server_flags`` and ``sglang_deploy_stamp``.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.metadata
import json
import os
import re
import shutil

# Run with the target's interpreter: locate sglang without importing it.  importlib.util.find_spec
# on a top-level name only runs the path finders; the current directory is dropped from sys.path
# first so a checkout named "sglang" in the cwd cannot shadow the installed package.
LOCATE_SNIPPET = r'''
import json, os, sys
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]
import importlib.util
r = {"executable": sys.executable, "python_version": "%d.%d.%d" % sys.version_info[:3], "locations": []}
try:
    s = importlib.util.find_spec("sglang")
except Exception as e:
    s = None
    r["error"] = "%s: %s" % (type(e).__name__, e)
if s is not None:
    r["origin"] = s.origin
    r["locations"] = list(s.submodule_search_locations or [])
print(json.dumps(r))
'''

# The file every SGLang runtime install has; a package directory without it is not one.
MARKER = os.path.join('srt', 'server_args.py')


class InstallError(Exception):
    """SGLang cannot be located.  ``msg`` says what and what to try; ``context`` goes into fail_json."""

    def __init__(self, msg, **context):
        super().__init__(msg)
        self.msg = msg
        self.context = context


@dataclasses.dataclass(frozen=True)
class Install:
    """An installed SGLang: its package directory, version (None when unreadable) and where the version came from."""

    path: str
    version: str | None = None
    version_source: str | None = None

    def to_json(self):
        return {'sglang_path': self.path, 'sglang_version': self.version, 'version_source': self.version_source}


# ---------------------------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------------------------

_VERSION_RE = re.compile(r'^(\d+)\.(\d+)(?:\.(\d+))?(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?(?:\+.*)?$')
_PY_VERSION_RE = re.compile(r'''^__version__\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]''', re.M)


def version_key(version):
    """Sortable key of a PEP 440 release string as SGLang uses them, or None if unknown."""
    if not version:
        return None
    match = _VERSION_RE.match(version.strip())
    if not match:
        return None
    major, minor, micro, pre_l, pre_n, post, dev = match.groups()
    if (major, minor, micro) == ('0', '0', '0'):
        return None  # 0.0.0.dev0: the fallback of sglang/version.py, not a release
    pre = {'a': 0, 'b': 1, 'rc': 2}.get(pre_l, 3)
    return (int(major), int(minor), int(micro or 0), pre, int(pre_n or 0), int(post or 0), -1 if dev is not None else 0)


def _canonical(name):
    return re.sub(r'[-_.]+', '_', name or '').lower()


def _dist_metadata_version(dist_info):
    """(name, version) from a ``*.dist-info`` directory's METADATA; (None, None) when unreadable."""
    try:
        dist = importlib.metadata.Distribution.at(dist_info)
        return dist.metadata['Name'], dist.version
    except (OSError, KeyError, TypeError, ValueError):
        return None, None


def read_version(package_dir):
    """Return (version, source) for the sglang package at ``package_dir``.

    Prefer the dist-info METADATA beside the package (what pip installed; the newest when a broken install left
    several), then ``sglang/_version.py``, then ``sglang/version.py`` (which from 0.5.7 may fall back to 0.0.0.dev0).
    """
    parent = os.path.dirname(os.path.abspath(package_dir))
    candidates = sorted(glob.glob(os.path.join(parent, 'sglang-*.dist-info', 'METADATA')), key=os.path.getmtime, reverse=True)
    for meta in candidates:
        name, version = _dist_metadata_version(os.path.dirname(meta))
        if version and (not name or _canonical(name) == 'sglang'):
            source = 'dist-info METADATA (%s)' % meta
            if len(candidates) > 1:
                source += ', newest of %d dist-info directories' % len(candidates)
            return version, source
    for name in ('_version.py', 'version.py'):
        path = os.path.join(package_dir, name)
        try:
            with open(path, 'rb') as handle:
                text = handle.read().decode('utf-8', 'replace')
        except OSError:
            continue
        found = _PY_VERSION_RE.search(text)
        if found:
            return found.group(1), 'sglang/%s (%s)' % (name, path)
    return None, None


def dist_version(package_dir, dist_name):
    """Version of another distribution installed beside sglang (e.g. flashinfer_python), or None."""
    site = os.path.dirname(os.path.abspath(package_dir))
    wanted = _canonical(dist_name)
    for dist in importlib.metadata.distributions(path=[site]):
        if _canonical(dist.metadata['Name']) == wanted:
            return dist.version
    return None


# ---------------------------------------------------------------------------------------------
# Locating the package
# ---------------------------------------------------------------------------------------------

def resolve_python(python):
    """Absolute path of the interpreter: a path must be an executable file, a bare name is looked up in PATH."""
    if os.sep in python:
        if os.path.isfile(python) and os.access(python, os.X_OK):
            return python
        raise InstallError('The interpreter %s does not exist or is not executable. Set the python option to the python of the environment '
                           'where SGLang is installed (for a venv: <venv>/bin/python).' % python, python=python)
    found = shutil.which(python)
    if found:
        return found
    raise InstallError('The interpreter %r was not found in PATH (%s). Set the python option to the absolute path of the python of the '
                       'environment where SGLang is installed.' % (python, os.environ.get('PATH', '')), python=python)


def locate_package(python, run):
    """Find the sglang package directory of the environment of ``python`` without importing sglang.

    ``run(argv, data)`` is a ``_command`` runner.  Returns (package_dir, interpreter_info).
    """
    argv = [python, '-c', LOCATE_SNIPPET]
    rc, out, err = run(argv, None)
    if rc != 0:
        raise InstallError(
            'Could not run the interpreter %s to locate SGLang (rc=%s): %s. Set the python option to the python of the '
            'environment where SGLang is installed (for a venv: <venv>/bin/python) or pass the sglang_path option.'
            % (python, rc, (err or out or '').strip()[-500:]),
            rc=rc, stdout=out, stderr=err, cmd=argv[:2] + ['<locate snippet>'])
    try:
        info = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise InstallError('Interpreter %s printed no usable answer while locating SGLang: %r' % (python, out[-500:]),
                           rc=rc, stdout=out, stderr=err) from None
    locations = info.get('locations') or []
    if not locations:
        raise InstallError(
            'SGLang is not installed for the interpreter %s (%s, Python %s)%s. Point the python option at the environment '
            'that has SGLang (for a venv: <venv>/bin/python) or pass the sglang_path option.'
            % (python, info.get('executable'), info.get('python_version'),
               ': %s' % info['error'] if info.get('error') else ''),
            interpreter=info)
    for location in locations:
        if os.path.isfile(os.path.join(location, MARKER)):
            return location, info
    raise InstallError('The sglang package found by %s at %s has no %s; it is not an SGLang runtime '
                       'install (or it is a namespace package). Pass the sglang_path option explicitly.'
                       % (python, ', '.join(locations), MARKER), interpreter=info)


def check_package_dir(path):
    """``path`` as an absolute sglang package directory; InstallError when it is not one."""
    path = os.path.abspath(path)
    if not os.path.isfile(os.path.join(path, MARKER)):
        raise InstallError('%s is not an installed sglang package directory (no %s there). Pass the directory named "sglang" '
                           'in site-packages, or the python option instead.' % (path, MARKER), sglang_path=path)
    return path


def locate(python, run, sglang_path=None):
    """The SGLang of the module options ``python``/``sglang_path`` (the latter wins), with its version."""
    if sglang_path:
        package_dir = check_package_dir(sglang_path)
    else:
        package_dir, _info = locate_package(resolve_python(python or 'python3'), run)
    version, source = read_version(package_dir)
    return Install(path=package_dir, version=version, version_source=source)
