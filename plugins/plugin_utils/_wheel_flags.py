# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The server flags of an SGLang release read from its wheel, without installing it (controller side).

A deploy in check mode on a host where pip would create or change the venv cannot read the release from the host (it
is not there yet). The wheel it would install is in sglang_service_wheelhouse on the controller, or, without a
wheelhouse, on the package index the host's pip uses: the controller downloads that one wheel (``pip download
--no-deps``, the index options of sglang_service_pip_extra_args) into its wheel cache, once per release
(``$LLMOPS_SGLANG_CACHE/wheels``, default ``~/.cache/llmops-sglang/wheels``). The flags are read the
way llmops.sglang.sglang_server_flags reads an installed release (``sglang._flags.parse_server_flags`` over the
source files, read from the zip archive in memory), so a misspelled flag or a value the release refuses fails the dry
run with the same message as the real one.

Every host of a run checks its arguments against the same wheel: the flags are parsed once per run and wheel (about
0.2 CPU-seconds each) and kept as JSON in the run's own temporary directory on the controller, which its forked workers
share and ansible-playbook removes at its end; the first host's worker parses while the others wait for it and read it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _flags as sf


# pip's options that say where packages come from (the rest of sglang_service_pip_extra_args is the install's business)
INDEX_OPTIONS = ('--index-url', '-i', '--extra-index-url', '--find-links', '-f', '--trusted-host')
INDEX_SWITCHES = ('--no-index', '--pre')
# Any platform's wheel of a release has the same Python sources; from 0.5.11 SGLang publishes platform wheels only.
DOWNLOAD = ('download', '--no-deps', '--only-binary=:all:', '--platform', 'manylinux_2_34_x86_64', '--python-version', '3.12',
            '--implementation', 'cp', '--disable-pip-version-check', '--quiet')
DOWNLOAD_TIMEOUT = 300


class WheelFlagsError(Exception):
    def __init__(self, msg: str):
        super().__init__(msg)
        self.msg = msg


def find_wheel(wheelhouse: str, version: str) -> Optional[str]:
    """The sglang wheel of ``version`` in ``wheelhouse`` (a directory on the controller), or None."""
    if not wheelhouse or not os.path.isdir(wheelhouse):
        return None
    wanted = re.compile(r'^sglang-%s-[^-]+-[^-]+-[^-]+\.whl$' % re.escape(version))
    names = sorted(n for n in os.listdir(wheelhouse) if wanted.match(n))
    return os.path.join(wheelhouse, names[0]) if names else None


def cache_dir() -> str:
    """The controller's wheel cache (shared with the test suite's, tests/sglang_wheels.py)."""
    root = os.environ.get('LLMOPS_SGLANG_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'llmops-sglang')
    return os.path.join(root, 'wheels')


def index_args(pip_extra_args: Sequence[str]) -> List[str]:
    """The options of ``pip_extra_args`` that choose the package index (``--index-url URL``, ``--find-links=DIR``, ...)."""
    out: List[str] = []
    words = list(pip_extra_args)
    for i, word in enumerate(words):
        name = word.split('=', 1)[0]
        if word in INDEX_SWITCHES or (name in INDEX_OPTIONS and '=' in word):
            out.append(word)
        elif word in INDEX_OPTIONS and i + 1 < len(words):
            out += [word, words[i + 1]]
    return out


def fetch_wheel(version: str, pip_extra_args: Sequence[str], cache: str, timeout: float = DOWNLOAD_TIMEOUT) -> Tuple[Optional[str], str]:
    """The wheel of sglang ``version`` in ``cache``, downloaded from the index once; ``(None, why)`` when pip cannot."""
    found = find_wheel(cache, version)
    if found is not None:
        return found, ''
    try:
        os.makedirs(cache, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache, prefix='.dl-') as tmp:
            argv = [sys.executable, '-m', 'pip'] + list(DOWNLOAD) + ['-d', tmp, 'sglang==%s' % version] + index_args(pip_extra_args)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
            got = find_wheel(tmp, version)
            if proc.returncode != 0 or got is None:
                lines = [line for line in (proc.stderr or proc.stdout or '').splitlines() if line.strip()]
                return None, 'pip download sglang==%s on the controller failed: %s' % (version, lines[-1] if lines else 'rc=%d' % proc.returncode)
            final = os.path.join(cache, os.path.basename(got))
            os.replace(got, final)  # atomic: hosts of one run may fetch the same release at once
            return final, ''
    except (OSError, subprocess.SubprocessError) as exc:
        return None, 'could not download sglang==%s into %s on the controller: %s' % (version, cache, exc)


def wheel_sources(archive: zipfile.ZipFile):
    """A loader ``modname -> text or None`` over the ``sglang`` package inside a wheel."""
    names = set(archive.namelist())

    def load(modname):
        if modname != 'sglang' and not modname.startswith('sglang.'):
            return None
        for rel in sf.module_relpath(modname):
            if rel in names:
                return archive.read(rel).decode('utf-8', 'replace')
        return None
    return load


def check_with_wheel(wheelhouse: str, version: str, args: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Check ``args`` against the flags of the wheel of ``version``; None when there is no such wheel. Raises
    WheelFlagsError naming the flags and values the release refuses."""
    path = find_wheel(wheelhouse, version)
    return None if path is None else check_wheel(path, version, args)


def check_from_index(version: str, args: Dict[str, Any], pip_extra_args: Sequence[str],
                     cache: Optional[str] = None) -> Tuple[Optional[Dict[str, Any]], str]:
    """Check ``args`` against the wheel of ``version`` the host's pip would download; ``(None, why)`` when the
    controller cannot get it (no route to the index: nothing proven either way). Raises WheelFlagsError as above."""
    path, why = fetch_wheel(version, pip_extra_args, cache or cache_dir())
    return (None, why) if path is None else (check_wheel(path, version, args), '')


# what check_args and its messages read of parse_server_flags' result (kept per run and wheel)
PARSED_KEYS = ('flags', 'boolean_flags', 'values', 'files')


def run_cache() -> Optional[str]:
    """The directory of this ansible-playbook run's parsed flags: in its temporary directory on the controller
    (DEFAULT_LOCAL_TMP, made once per run before the workers fork, removed at the run's end), or None outside a run."""
    try:
        from ansible import constants as C  # pylint: disable=import-outside-toplevel
        return os.path.join(C.DEFAULT_LOCAL_TMP, 'llmops-sglang-flags')
    except Exception:  # pylint: disable=broad-except
        return None


def parse_wheel(path: str) -> Dict[str, Any]:
    """What check_args needs of the server flags of the wheel at PATH (parse_server_flags over its sources)."""
    with zipfile.ZipFile(path) as archive:
        parsed = sf.parse_server_flags(wheel_sources(archive))
    return dict((k, parsed[k]) for k in PARSED_KEYS)


def parsed_flags(path: str, cache: Optional[str]) -> Dict[str, Any]:
    """parse_wheel(PATH), once per wheel (its path, size and modification time) in CACHE: the first caller parses under
    a lock while the others wait and read its JSON; without CACHE, or when it cannot be used, parsed here."""
    if not cache:
        return parse_wheel(path)
    stat = os.stat(path)
    key = hashlib.sha256(('%s\0%d\0%d' % (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)).encode()).hexdigest()[:32]
    kept = os.path.join(cache, key + '.json')
    try:
        os.makedirs(cache, exist_ok=True)
        with open(kept + '.lock', 'w', encoding='utf-8') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(kept, encoding='utf-8') as f:
                    return json.load(f)
            except (OSError, ValueError):
                pass
            parsed = parse_wheel(path)
            tmp = '%s.%d.tmp' % (kept, os.getpid())
            with open(tmp, 'w', encoding='utf-8') as f:
                json.dump(parsed, f)
            os.replace(tmp, kept)
            return parsed
    except OSError:
        return parse_wheel(path)


def check_wheel(path: str, version: str, args: Dict[str, Any], cache: Optional[str] = None) -> Dict[str, Any]:
    """Check ARGS against the flags of the wheel at PATH (parsed once per run and wheel in CACHE, by default the run's)."""
    try:
        parsed = parsed_flags(path, run_cache() if cache is None else cache)
    except (OSError, zipfile.BadZipFile, sf.FlagSourceError) as exc:
        raise WheelFlagsError('Could not read the server flags of SGLang %s from %s: %s' % (version, path, exc)) from None
    unknown, problems = sf.check_args(args, parsed)
    if unknown or problems:
        parts = ([sf.unknown_message(unknown, version, release='SGLang')] if unknown else []) + problems
        raise WheelFlagsError('%s. Fix the server arguments (flag names are checked against %s, read from the wheel %s) or '
                              'install the SGLang release that has these flags.'
                              % ('; '.join(parts), ', '.join(parsed['files'][:3]), os.path.basename(path)))
    return {'wheel': path, 'flags': len(parsed['flags'])}
