# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Real SGLang releases from PyPI as test inputs (controller/test side only).

Downloads wheels with ``pip download --no-deps`` into
``${LLMOPS_SGLANG_CACHE:-$HOME/.cache/llmops-sglang}/wheels`` and extracts the files the SM120
patcher touches (plus the dist-info METADATA) into ``.../trees/<version>/``.  Both steps are
cached.  From 0.5.11 the wheels are platform wheels, so they are fetched with
``--only-binary=:all: --platform manylinux_2_34_x86_64 --python-version 3.12``.

A download failure raises :class:`WheelUnavailable` with pip's output: integration tests, which may download, fail
loudly when PyPI is unreachable.

Unit tests run offline: under ``ansible-test units`` (or with ``LLMOPS_SGLANG_OFFLINE=1``) nothing is downloaded, and
a test whose release is missing from the cache is skipped naming the command that fills it, ``python
tests/sglang_wheels.py`` (tests/run-all.sh runs it before the units, and fails that step when PyPI cannot be reached).
``UNIT_VERSIONS`` lists every release the unit tests read.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# Fixture set: at least one release per known shape of every site (docs/sglang_patch_sm120.md).
FIXTURE_VERSIONS = ('0.4.10', '0.5.3', '0.5.7', '0.5.9', '0.5.10', '0.5.13', '0.5.14', '0.5.18', '0.5.20', '0.5.23')

# Every release the unit tests read (the fixture set plus the releases around flag introductions).
UNIT_VERSIONS = FIXTURE_VERSIONS + ('0.4.8', '0.4.8.post1', '0.4.9', '0.5.2')

# Files inside the wheel that the patcher may read or write.
SITE_FILES = (
    'sglang/__init__.py',
    'sglang/version.py',
    'sglang/_version.py',
    'sglang/srt/__init__.py',
    'sglang/srt/server_args.py',
    'sglang/srt/layers/communicator.py',
    'sglang/srt/layers/layer_boundary/residual/add_norm.py',
    'sglang/srt/arg_groups/overrides.py',
    'sglang/srt/layers/flashinfer_comm_fusion.py',
    # where the helpers live: is_sm120_supported (0.5.4+) and get_platform().is_sm120 (0.5.19+)
    'sglang/srt/utils.py',
    'sglang/srt/utils/__init__.py',
    'sglang/srt/utils/common.py',
    'sglang/srt/runtime_context.py',
)
# Bump when SITE_FILES changes so cached trees are extracted again.
TREE_FORMAT = '2'

PIP_TIMEOUT = 600


class WheelUnavailable(RuntimeError):
    """A release could not be downloaded or read."""


def cache_root() -> Path:
    env = os.environ.get('LLMOPS_SGLANG_CACHE')
    root = Path(env) if env else Path.home() / '.cache' / 'llmops-sglang'
    root.mkdir(parents=True, exist_ok=True)
    return root


def _release_tuple(version: str) -> tuple:
    match = re.match(r'^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$', version)
    if not match:
        raise ValueError('not a plain SGLang release version: %r' % version)
    return tuple(int(x) if x is not None else 0 for x in match.groups())


def is_platform_release(version: str) -> bool:
    """From 0.5.11 SGLang publishes only cp3xx manylinux wheels."""
    return _release_tuple(version) >= (0, 5, 11, 0)


def pip_command() -> list:
    return [sys.executable, '-m', 'pip']


# Resolve as for a CPython 3.12 host whatever runs the tests (SGLang 0.5.x requires Python >= 3.10, so pip on
# 3.9 would otherwise see no release); the platform tag is only needed for the platform wheels of 0.5.11+.
TARGET_ARGS = ['--only-binary=:all:', '--python-version', '3.12']
PLATFORM_ARGS = ['--platform', 'manylinux_2_34_x86_64']


def download_args(version: str) -> list:
    args = ['download', '--no-deps', '--disable-pip-version-check', 'sglang==%s' % version] + TARGET_ARGS
    if is_platform_release(version):
        args += PLATFORM_ARGS
    return args


def _find_wheel(directory: Path, version: str):
    for wheel in sorted(directory.glob('sglang-%s-*.whl' % version)):
        return wheel
    return None


def offline() -> bool:
    """True where tests must not reach PyPI: under ``ansible-test units`` (whose environment always carries
    ANSIBLE_CONTROLLER_MIN_PYTHON_VERSION, and nothing of ours) or with LLMOPS_SGLANG_OFFLINE=1."""
    return 'ANSIBLE_CONTROLLER_MIN_PYTHON_VERSION' in os.environ or os.environ.get('LLMOPS_SGLANG_OFFLINE') == '1'


def wheel_path(version: str) -> Path:
    """Return the cached wheel of ``version``, downloading it once (never when offline())."""
    wheels = cache_root() / 'wheels'
    wheels.mkdir(parents=True, exist_ok=True)
    found = _find_wheel(wheels, version)
    if found is not None:
        return found
    if offline():
        reason = ('SGLang %s is not in the wheel cache %s and unit tests do not download: fill the cache first with '
                  '"python tests/sglang_wheels.py" (tests/run-all.sh does, before the units), or add the release to '
                  'UNIT_VERSIONS there.' % (version, wheels))
        if 'pytest' in sys.modules:  # a unit test without its input is skipped, saying why; tests/run-all.sh fills the cache first
            sys.modules['pytest'].skip(reason, allow_module_level=True)
        raise WheelUnavailable(reason)
    with tempfile.TemporaryDirectory(dir=str(wheels), prefix='.dl-') as tmp:
        argv = pip_command() + download_args(version) + ['-d', tmp]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise WheelUnavailable('could not run %s: %s' % (' '.join(argv), exc)) from exc
        got = _find_wheel(Path(tmp), version)
        if proc.returncode != 0 or got is None:
            raise WheelUnavailable(
                'pip could not download SGLang %s from PyPI (rc=%s); these tests need the real released wheel. '
                'Check network access to PyPI or pre-fill %s.\ncommand: %s\nstderr: %s'
                % (version, proc.returncode, wheels, ' '.join(argv), proc.stderr.strip()[-2000:]))
        final = wheels / got.name
        os.replace(str(got), str(final))
        return final


def wheelhouse_for_test(work, version: str) -> Path:
    """WORK/wheelhouse holding SGLang VERSION's wheel (a role test's sglang_service_wheelhouse); fails the calling test,
    saying why, when the wheel cannot be fetched."""
    # only a test calls this; the cache filler (python tests/sglang_wheels.py) runs without pytest
    import pytest  # pylint: disable=import-outside-toplevel
    wheelhouse = Path(str(work)) / 'wheelhouse'
    wheelhouse.mkdir(exist_ok=True)
    try:
        shutil.copy(str(wheel_path(version)), str(wheelhouse))
    except WheelUnavailable as exc:
        pytest.fail('SGLang %s is needed from PyPI for this test and could not be fetched:\n%s' % (version, exc))
    return wheelhouse


def server_flags(version: str) -> dict:
    """The server flags SGLang ``version`` defines, read from its wheel's source by the collection's own parser
    (module_utils/sglang/_flags.py), as llmops.sglang.sglang_server_flags returns them."""
    from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _flags  # pylint: disable=import-outside-toplevel
    with zipfile.ZipFile(str(wheel_path(version))) as wheel:
        names = set(wheel.namelist())

        def load(modname):
            for rel in _flags.module_relpath(modname):
                if rel in names:
                    return wheel.read(rel).decode('utf-8')
            return None
        return _flags.parse_server_flags(load)


def tree_path(version: str) -> Path:
    """Return ``<cache>/trees/<version>`` holding ``sglang/...`` site files and the dist-info METADATA."""
    trees = cache_root() / 'trees'
    final = trees / version
    marker = final / '.complete'
    if marker.exists() and marker.read_text().split('\n')[0] == 'format %s' % TREE_FORMAT:
        return final
    wheel = wheel_path(version)
    trees.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=str(trees), prefix='.x-%s-' % version))
    try:
        with zipfile.ZipFile(str(wheel)) as zf:
            names = set(zf.namelist())
            wanted = [n for n in SITE_FILES if n in names]
            wanted += [n for n in names if re.match(r'^sglang-[^/]+\.dist-info/METADATA$', n)]
            for name in wanted:
                target = tmp / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
        (tmp / '.complete').write_text('format %s\n%s\n' % (TREE_FORMAT, wheel.name))
        if final.exists():
            # an older tree format: move it aside first (another worker may be doing the same)
            stale = Path(tempfile.mkdtemp(dir=str(trees), prefix='.old-%s-' % version))
            try:
                os.replace(str(final), str(stale / 'tree'))
            except OSError:
                pass
            shutil.rmtree(str(stale), ignore_errors=True)
        try:
            os.replace(str(tmp), str(final))
        except OSError:
            # a parallel test worker (pytest-xdist) finished the same extraction first
            shutil.rmtree(str(tmp), ignore_errors=True)
            if not (final / '.complete').exists():
                raise
    except BaseException:
        shutil.rmtree(str(tmp), ignore_errors=True)
        raise
    return final


def copy_tree(version: str, dest: Path) -> Path:
    """Copy the extracted release into ``dest`` (a fresh site-packages-like dir); return ``dest/sglang``."""
    src = tree_path(version)
    for entry in src.iterdir():
        if entry.name.startswith('.'):
            continue
        if entry.is_dir():
            shutil.copytree(str(entry), str(dest / entry.name))
        else:
            shutil.copy2(str(entry), str(dest / entry.name))
    return dest / 'sglang'


def make_venv(root: Path, version: str) -> dict:
    """A real venv (no pip) at ``root`` with SGLang ``version``'s released files in its site-packages:
    ``{'python', 'site'}``."""
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(root)], check=True)
    site = next(Path(root).glob('lib/python3*/site-packages'))
    copy_tree(version, site)
    return {'python': str(Path(root) / 'bin' / 'python'), 'site': site}


def released_versions(minimum: str = '0.4.6') -> list:
    """Every plain release of sglang on the index, oldest first, from ``minimum`` on (pip index versions)."""
    argv = pip_command() + ['index', 'versions', 'sglang', '--disable-pip-version-check'] + TARGET_ARGS + PLATFORM_ARGS
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False)
    match = re.search(r'Available versions:\s*(.+)', proc.stdout)
    if proc.returncode != 0 or not match:
        raise WheelUnavailable('could not list SGLang releases: %s\n%s' % (' '.join(argv), proc.stderr[-2000:]))
    out = []
    for item in match.group(1).split(','):
        item = item.strip()
        try:
            key = _release_tuple(item)
        except ValueError:
            continue
        if key >= _release_tuple(minimum):
            out.append(item)
    return sorted(out, key=_release_tuple)


if __name__ == '__main__':
    for ver in sys.argv[1:] or UNIT_VERSIONS:
        print(ver, tree_path(ver))


def snapshot(root) -> dict:
    """sha256 of every file below ``root`` by relative path: compare two snapshots to prove nothing was written."""
    out = {}
    for base, _dirs, files in os.walk(str(root)):
        for name in files:
            path = os.path.join(base, name)
            with open(path, 'rb') as handle:
                out[os.path.relpath(path, str(root))] = hashlib.sha256(handle.read()).hexdigest()
    return out


def run_command(argv, data):
    """The ``run(argv, data) -> (rc, stdout, stderr)`` callable that module_utils._sm120_patch expects."""
    proc = subprocess.run(argv, input=data, capture_output=True, check=False)
    return proc.returncode, proc.stdout.decode('utf-8', 'replace'), proc.stderr.decode('utf-8', 'replace')
