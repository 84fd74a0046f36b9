# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's REAL server argument parser on a machine without a GPU (test side only).

``ServerArgs.add_cli_args`` lives in ``sglang/srt/server_args.py``, whose imports pull in torch,
torchvision, transformers and a dozen light packages.  This helper builds, once, a venv under
``${LLMOPS_SGLANG_CACHE:-$HOME/.cache/llmops-sglang}/venvs/argparse-py3.12`` with exactly those
imports (``BASE_REQUIREMENTS``), and for each release a ``--target`` directory with
``pip install --no-deps sglang==X`` (the cached PyPI wheel from tests/sglang_wheels.py) plus the
``transformers`` release that SGLang pins in its METADATA.  Then :func:`real_parser` runs
``ServerArgs.add_cli_args(argparse.ArgumentParser())`` in that interpreter and returns every action,
and parses the given command lines with it.

torch: PyPI's torch wheel (a CUDA build; importing it needs no GPU) with the matching torchvision.
The CPU-only torch 2.13.0 wheel that may lie on a machine's disk does not work here: PyPI has no CPU
torchvision for it, and the CUDA torchvision cannot load its operators on a CPU torch
(``operator torchvision::nms does not exist``), which SGLang's import of torchvision.transforms hits.

Everything fails loudly (RuntimeError with pip's output) and never skips.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position

PYTHON_VERSION = '3.12'
# What `import sglang.srt.server_args` needs for the releases 0.4.10 - 0.5.23 (found by importing them one by one).
BASE_REQUIREMENTS = (
    # triton: the release torch 2.14.1 asks for (~=3.8.0); unpinned, pip first downloaded the newest (286 MB), then backtracked
    'torch==2.14.1', 'torchvision==0.29.1', 'triton==3.8.0',
    'aiohttp', 'attrs', 'dill', 'fastapi', 'httpx', 'ipython', 'msgspec', 'numpy', 'openai', 'orjson', 'packaging',
    'partial-json-parser', 'pillow', 'psutil', 'pybase64', 'pydantic', 'pyyaml', 'pyzmq', 'requests', 'safetensors',
    'sentencepiece', 'starlette', 'tqdm',
)
PIP_TIMEOUT = 1800
# pip install's options for every install here. --no-compile: pip byte-compiled every file it installed (torch's, each
# release's sglang and transformers: ~19 of the venv's 87 CPU-s, ~9 of a release's transformers' 15, measured
# 2026-12-04); an import compiles what it loads, once (the directories are writable), and the parsers load a small part.
PIP_INSTALL = ('-m', 'pip', 'install', '--disable-pip-version-check', '-q', '--no-compile')

# One interpreter for all releases: torch and torchvision (the same for every release, from the venv; ~6 of the ~14
# CPU-s a release's dump costs) are imported once, then each release is dumped in a fork of its own with its own
# directories first on sys.path, so no module of one release (sglang, transformers) is ever seen by another's import.
# A release whose directories hold another release of a package that import already loaded (its pinned transformers
# brings numpy, tqdm, typing_extensions: today the venv's releases) would not get its own: the fork says so
# (@@SHADOW@@) and that release is dumped in a fresh interpreter, as before (LLMOPS_ARGPARSE_FRESH=1, PYTHONPATH).
DUMP_SCRIPT = r'''
import argparse, glob, json, os, sys, traceback, warnings
warnings.simplefilter("ignore")
if not os.environ.get("LLMOPS_ARGPARSE_FRESH"):
    import torch, torchvision.transforms  # noqa: F401  imported by every release's server_args, before the forks


def owner(directory, name):
    """The dist-info directory name (distribution-version) in DIRECTORY whose RECORD lists top-level NAME, or None."""
    for record in glob.glob(os.path.join(directory, "*.dist-info", "RECORD")):
        with open(record, encoding="utf-8", errors="replace") as handle:
            if any(line.startswith((name + "/", name + ".py,")) for line in handle):
                return os.path.basename(os.path.dirname(record))
    return None


def shadowed(paths):
    """Top-level modules already loaded that PATHS hold in another distribution release than the loaded one."""
    differ = []
    for name in sorted({m.split(".")[0] for m in sys.modules}):
        loaded = getattr(sys.modules.get(name), "__file__", None)
        if not loaded:
            continue
        site = os.path.dirname(os.path.dirname(loaded)) if loaded.endswith("__init__.py") else os.path.dirname(loaded)
        for directory in paths:
            if os.path.isdir(os.path.join(directory, name)) or os.path.isfile(os.path.join(directory, name + ".py")):
                if owner(directory, name) != owner(site, name):
                    differ.append(name)
    return differ


def dump(cases):
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    actions = []
    for a in parser._actions:
        if not a.option_strings or a.dest == "help":
            continue
        kind = a.type.__name__ if a.type in (int, float, str) else (None if a.type is None else "custom")
        choices = [c if isinstance(c, (str, int, float)) else str(c) for c in a.choices] if a.choices is not None else None
        actions.append({"flags": list(a.option_strings), "dest": a.dest, "nargs": a.nargs, "cls": type(a).__name__,
                        "type": kind, "choices": choices})
    parsed = []
    for argv in cases:
        try:
            ns = parser.parse_args(argv)
            parsed.append({"ok": True, "values": {k: v for k, v in vars(ns).items() if isinstance(v, (str, int, float, bool, list, dict, type(None)))}})
        except SystemExit as exc:
            parsed.append({"ok": False, "code": exc.code})
    return {"actions": actions, "parsed": parsed}


for job in json.loads(sys.stdin.read()):
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        sys.path[:0] = job["path"]
        differ = [] if os.environ.get("LLMOPS_ARGPARSE_FRESH") else shadowed(job["path"])
        try:
            if differ:
                line = "@@SHADOW@@" + json.dumps([job["version"], differ])
            else:
                    line = "@@JSON@@" + json.dumps([job["version"], dump(job["cases"])], default=str)
        except BaseException:  # the parent says which release failed, with its traceback
            line = "@@ERROR@@" + json.dumps([job["version"], traceback.format_exc()])
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        os._exit(0)
    _pid, status = os.waitpid(pid, 0)
    if status:
        print("@@ERROR@@" + json.dumps([job["version"], "its process ended with wait status %d" % status]), flush=True)
'''


def _run(argv, **kw):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False, **kw)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError('could not run %s: %s' % (' '.join(argv), exc)) from exc


def base_python() -> str:
    """A Python 3.12 to build the venv with: LLMOPS_ARGPARSE_PYTHON, this interpreter, python3.12, pyenv's 3.12.x."""
    explicit = os.environ.get('LLMOPS_ARGPARSE_PYTHON')
    if explicit:
        return explicit
    if sys.version_info[:2] == (3, 12):
        return sys.executable
    found = shutil.which('python3.12')
    if found and _run([found, '-c', 'pass']).returncode == 0:
        return found
    for candidate in sorted(glob.glob(os.path.expanduser('~/.pyenv/versions/3.12.*/bin/python'))):
        return candidate
    raise RuntimeError('no Python 3.12 found for the SGLang argparse venv; set LLMOPS_ARGPARSE_PYTHON')


@contextlib.contextmanager
def _locked(name):
    """Serialise building one cached item across processes (pytest-xdist workers)."""
    path = sglang_wheels.cache_root() / ('.%s.lock' % name)
    with open(str(path), 'w') as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def venv_python() -> Path:
    """The venv's python, building the venv once (marker file ``.complete`` lists the requirements)."""
    with _locked('argparse-venv'):
        return _venv_python()


def _venv_python() -> Path:
    root = sglang_wheels.cache_root() / 'venvs' / ('argparse-py' + PYTHON_VERSION)
    python = root / 'bin' / 'python'
    marker = root / '.complete'
    wanted = '\n'.join(BASE_REQUIREMENTS) + '\n'
    if marker.exists() and marker.read_text() == wanted and python.exists():
        return python
    if root.exists():
        shutil.rmtree(str(root))
    proc = _run([base_python(), '-m', 'venv', str(root)])
    if proc.returncode != 0:
        raise RuntimeError('could not create the venv %s: %s' % (root, proc.stderr))
    proc = _run([str(python), *PIP_INSTALL, *BASE_REQUIREMENTS])
    if proc.returncode != 0:
        raise RuntimeError('pip could not install the packages SGLang\'s server_args imports into %s (rc=%s); needs PyPI.\n%s'
                           % (root, proc.returncode, (proc.stdout + proc.stderr)[-4000:]))
    marker.write_text(wanted)
    return python


def transformers_pin(wheel: Path):
    import zipfile  # pylint: disable=import-outside-toplevel
    with zipfile.ZipFile(str(wheel)) as zf:
        for name in zf.namelist():
            if re.match(r'^sglang-[^/]+\.dist-info/METADATA$', name):
                meta = zf.read(name).decode('utf-8', 'replace')
                found = re.search(r'^Requires-Dist:\s*transformers\s*==\s*([0-9][^;\s]*)', meta, re.M)
                return found.group(1) if found else None
    return None


def release_dir(version: str) -> Path:
    """Cached directory with ``pkg/`` (``pip install --no-deps --target`` of the real sglang release) and ``deps/``
    (the transformers release SGLang pins, with its own requirements); both go on PYTHONPATH."""
    python = venv_python()
    with _locked('argparse-release-' + version):
        return _release_dir(python, version)


def _release_dir(python, version):
    final = sglang_wheels.cache_root() / 'argparse-releases' / version
    if (final / '.complete').exists() and (final / 'pkg' / 'sglang').is_dir():
        return final
    wheel = sglang_wheels.wheel_path(version)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=str(final.parent), prefix='.t-%s-' % version))
    try:
        proc = _run([str(python), *PIP_INSTALL, '--no-deps', '--no-index',
                     '--find-links', str(wheel.parent), '--target', str(tmp / 'pkg'), 'sglang==%s' % version])
        if proc.returncode != 0:
            raise RuntimeError('pip install --no-deps sglang==%s failed:\n%s' % (version, (proc.stdout + proc.stderr)[-4000:]))
        pin = transformers_pin(wheel)
        if pin:
            # transformers checks its own pins (tokenizers, huggingface-hub) at import time: install it with them,
            # in its own directory (pip --target does not merge into a directory that already has bin/)
            proc = _run([str(python), *PIP_INSTALL, '--target', str(tmp / 'deps'),
                         'transformers==%s' % pin])
            if proc.returncode != 0:
                raise RuntimeError('pip install transformers==%s (pinned by SGLang %s) failed:\n%s'
                                   % (pin, version, (proc.stdout + proc.stderr)[-4000:]))
        (tmp / '.complete').write_text(wheel.name + '\n')
        if final.exists():
            shutil.rmtree(str(final))
        os.replace(str(tmp), str(final))
    except BaseException:
        shutil.rmtree(str(tmp), ignore_errors=True)
        raise
    return final


def _dump(python, jobs, fresh=False):
    """Run DUMP_SCRIPT on JOBS; ``({version: result}, {version: why it failed}, {version: shadowed modules})``."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PYTHONWARNINGS='ignore')
    env.pop('PYTHONPATH', None)
    env.pop('LLMOPS_ARGPARSE_FRESH', None)
    # the cached directories are installed without byte code (PIP_INSTALL): the first dump writes what it imports, once
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    if fresh:
        env.update(PYTHONPATH=os.pathsep.join(jobs[0]['path']), LLMOPS_ARGPARSE_FRESH='1')
    proc = _run([str(python), '-c', DUMP_SCRIPT], input=json.dumps(jobs), env=env, cwd='/')
    results, errors, shadows = {}, {}, {}
    for line in proc.stdout.splitlines():
        for marker, into in (('@@JSON@@', results), ('@@ERROR@@', errors), ('@@SHADOW@@', shadows)):
            if line.startswith(marker):
                version, value = json.loads(line[len(marker):])
                into[version] = value
    for job in jobs:
        if not any(job['version'] in found for found in (results, errors, shadows)):
            errors[job['version']] = 'no result (rc=%s)' % proc.returncode
    errors = dict((version, 'building the real argument parser of SGLang %s failed: %s\n%s'
                   % (version, why, proc.stderr[-4000:])) for version, why in errors.items())
    return results, errors, shadows


def real_parsers(cases_by_version):
    """Build each release's real parser, all in one interpreter (DUMP_SCRIPT); return ``(results, errors)``:
    ``{version: {"actions": [...], "parsed": [...]}}`` for the argv cases given per version, and ``{version: message}``
    for each release whose dump failed."""
    python = venv_python()
    jobs = []
    for version, cases in cases_by_version.items():
        target = release_dir(version)
        jobs.append({'version': version, 'path': [str(target / 'pkg'), str(target / 'deps')],
                     'cases': [list(c) for c in cases]})
    results, errors, shadows = _dump(python, jobs)
    for job in jobs:
        if job['version'] in shadows:  # its own releases of those packages: a fresh interpreter, they first on its path
            got, failed, _shadows = _dump(python, [job], fresh=True)
            results.update(got)
            errors.update(failed)
    return results, errors


def real_parser(version: str, cases=()):
    """Build SGLang ``version``'s real parser; return ``{"actions": [...], "parsed": [...]}`` for argv ``cases``."""
    results, errors = real_parsers({version: cases})
    if version in errors:
        raise RuntimeError(errors[version])
    return results[version]


if __name__ == '__main__':
    for ver in sys.argv[1:]:
        got = real_parser(ver)
        print(ver, sum(len(a['flags']) for a in got['actions']), 'option strings')
