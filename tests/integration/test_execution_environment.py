# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""AWX / AAP packaging: the collection's ansible-builder metadata and the documented execution-environment.yml.

Real tools: ``ansible-galaxy collection build`` / ``install`` of this checkout, and ansible-builder from PyPI in a
scratch venv (cached under ${LLMOPS_SGLANG_CACHE:-~/.cache/llmops-sglang}/venvs/ansible-builder):

* ``ansible-builder introspect --sanitize`` on the installed tarball reads meta/execution-environment.yml and finds
  the requirements.txt / bindep.txt it points to (so they are not build_ignore'd);
* ``ansible-builder create`` accepts the version 3 example from docs/execution-environment.md and writes a
  Containerfile (no container engine is needed for ``create``).

Needs PyPI for the first run (fails, never skips, without it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / 'tests'))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position

BUILDER = 'ansible-builder>=3.1,<4'


# the file on one worker: its module-scoped set-up runs once (tests/run-all.sh: --dist loadgroup; docs/testing.md)
pytestmark = pytest.mark.xdist_group('test_execution_environment')


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=900, **kw)


def _galaxy():
    here = Path(sys.executable).parent / 'ansible-galaxy'
    found = str(here) if here.exists() else shutil.which('ansible-galaxy')
    if not found:
        pytest.fail('ansible-galaxy is not installed next to %s nor in PATH' % sys.executable)
    return found


@pytest.fixture(scope='module')
def builder():
    venv = sglang_wheels.cache_root() / 'venvs' / 'ansible-builder'
    exe = venv / 'bin' / 'ansible-builder'
    if not exe.exists():
        proc = _run([sys.executable, '-m', 'venv', str(venv)])
        assert proc.returncode == 0, proc.stderr
        proc = _run([str(venv / 'bin' / 'python'), '-m', 'pip', 'install', '-q', '--disable-pip-version-check', BUILDER])
        if proc.returncode != 0:
            shutil.rmtree(str(venv), ignore_errors=True)
            pytest.fail('could not install %s from PyPI:\n%s' % (BUILDER, proc.stdout + proc.stderr))
    return exe


@pytest.fixture(scope='module')
def tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp('build')
    proc = _run([_galaxy(), 'collection', 'build', '--force', '--output-path', str(out), str(ROOT)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = sorted(out.glob('llmops-sglang-*.tar.gz'))
    assert len(found) == 1, found
    return found[0]


def test_collection_metadata_files():
    meta = yaml.safe_load((ROOT / 'meta' / 'execution-environment.yml').read_text())
    assert meta == {'version': 1, 'dependencies': {'python': 'requirements.txt', 'system': 'bindep.txt'}}
    reqs = [ln for ln in (ROOT / 'requirements.txt').read_text().splitlines() if ln.strip() and not ln.lstrip().startswith('#')]
    # the EE provides ansible-core; the controller plugins need only jmespath (sglang_run_report's query option)
    assert reqs == ['jmespath>=1.0.1']
    binds = [ln for ln in (ROOT / 'bindep.txt').read_text().splitlines() if ln.strip() and not ln.lstrip().startswith('#')]
    assert binds == ['openssh-clients [platform:rpm]', 'openssh-client [platform:dpkg]']


def test_introspect_finds_the_collection_requirements(builder, tarball, tmp_path):
    dest = tmp_path / 'collections'
    proc = _run([_galaxy(), 'collection', 'install', '--offline', '--force', '-p', str(dest), str(tarball)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (dest / 'ansible_collections' / 'llmops' / 'sglang' / 'meta' / 'execution-environment.yml').is_file()
    proc = _run([str(builder), 'introspect', '--sanitize', str(dest)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = yaml.safe_load(proc.stdout.split('---', 1)[1])
    assert data['python'] == ['jmespath>=1.0.1  # from collection llmops.sglang']
    assert data['system'] == ['openssh-clients [platform:rpm]  # from collection llmops.sglang',
                              'openssh-client [platform:dpkg]  # from collection llmops.sglang']


def _documented_definition():
    text = (ROOT / 'docs' / 'execution-environment.md').read_text()
    blocks = re.findall(r'```yaml\n(.*?)```', text, re.S)
    defs = [b for b in blocks if re.search(r'^version: 3$', b, re.M)]
    assert len(defs) == 1, 'docs/execution-environment.md must hold exactly one version 3 definition'
    return defs[0]


def test_create_accepts_the_documented_definition(builder, tarball, tmp_path):
    definition = _documented_definition()
    work = tmp_path / 'ee'
    work.mkdir()
    (work / 'execution-environment.yml').write_text(definition)
    name = yaml.safe_load(definition)['additional_build_files'][0]['src']
    shutil.copy(str(tarball), str(work / name))
    (work / 'requirements.yml').write_text('collections:\n  - name: /build/%s\n    type: file\n' % name)
    proc = _run([str(builder), 'create', '-f', 'execution-environment.yml', '-c', 'context', '--output-filename', 'Containerfile', '-v', '3'], cwd=str(work))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (work / 'context' / 'Containerfile').read_text()
    assert 'ARG EE_BASE_IMAGE="registry.access.redhat.com/ubi9/ubi:latest"' in containerfile
    assert 'ARG PYCMD="/usr/bin/python3.12"' in containerfile
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core>=2.19,<2.22 ansible-runner"' in containerfile
    # prepend_galaxy lands in the galaxy stage, before the collections are installed
    galaxy_stage = containerfile.split('FROM base AS galaxy', 1)[1].split('FROM base AS builder', 1)[0]
    assert 'COPY _build/collections/%s /build/%s' % (name, name) in galaxy_stage
    assert 'ENV ANSIBLE_SSH_CONTROL_PATH_DIR=/tmp/.ansible-cp' in containerfile.split('FROM base AS final', 1)[1]
    assert (work / 'context' / '_build' / 'collections' / name).is_file()
    assert os.path.isfile(str(work / 'context' / '_build' / 'requirements.yml'))
