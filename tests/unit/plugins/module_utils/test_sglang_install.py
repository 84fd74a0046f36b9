# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Locating SGLang and reading versions (sglang._install) on real site directories: dist-info directories as pip
writes them, real interpreters found in PATH."""

from __future__ import annotations

import os
import sys

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _install as install
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import local_run


def dist_info(site, name, version, dist_name=None):
    """A dist-info directory with the METADATA header pip writes (Metadata-Version 2.1)."""
    path = site / ('%s-%s.dist-info' % (name, version))
    path.mkdir()
    (path / 'METADATA').write_text('Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: x\n\nbody\n' % (dist_name or name, version))
    return path


@pytest.fixture
def site(tmp_path):
    site = tmp_path / 'site-packages'
    (site / 'sglang' / 'srt').mkdir(parents=True)
    (site / 'sglang' / 'srt' / 'server_args.py').write_text('')
    return site


def test_version_of_sglang_and_of_a_distribution_beside_it(site):
    dist_info(site, 'sglang', '0.5.9')
    dist_info(site, 'flashinfer_python', '0.6.3', dist_name='flashinfer-python')
    package = str(site / 'sglang')
    assert install.read_version(package) == ('0.5.9', 'dist-info METADATA (%s)' % (site / 'sglang-0.5.9.dist-info' / 'METADATA'))
    assert install.dist_version(package, 'flashinfer_python') == '0.6.3'
    assert install.dist_version(package, 'Flashinfer.Python') == '0.6.3'
    assert install.dist_version(package, 'torch') is None


def test_the_newest_of_several_sglang_dist_infos_wins_and_is_named(site):
    old = dist_info(site, 'sglang', '0.5.8')
    os.utime(str(old / 'METADATA'), (1, 1))
    dist_info(site, 'sglang', '0.5.9')
    version, source = install.read_version(str(site / 'sglang'))
    assert version == '0.5.9' and source.endswith(', newest of 2 dist-info directories')


def test_locate_with_sglang_path_reads_the_version_and_refuses_other_directories(site, tmp_path):
    dist_info(site, 'sglang', '0.5.9')
    found = install.locate('python3', local_run, sglang_path=str(site / 'sglang'))
    assert found.to_json() == {'sglang_path': str(site / 'sglang'), 'sglang_version': '0.5.9',
                               'version_source': 'dist-info METADATA (%s)' % (site / 'sglang-0.5.9.dist-info' / 'METADATA')}
    with pytest.raises(install.InstallError) as info:
        install.locate('python3', local_run, sglang_path=str(tmp_path))
    assert info.value.context == {'sglang_path': str(tmp_path)}


def test_resolve_python_finds_bare_names_in_path_and_checks_paths(monkeypatch, tmp_path):
    monkeypatch.setenv('PATH', os.path.dirname(sys.executable))
    assert install.resolve_python(os.path.basename(sys.executable)) == sys.executable
    assert install.resolve_python(sys.executable) == sys.executable
    with pytest.raises(install.InstallError) as info:
        install.resolve_python('no-such-python')
    assert info.value.context == {'python': 'no-such-python'}
    with pytest.raises(install.InstallError) as info:
        install.resolve_python(str(tmp_path / 'python'))
    assert info.value.context == {'python': str(tmp_path / 'python')}


def test_locate_package_of_an_interpreter_without_sglang():
    with pytest.raises(install.InstallError) as info:
        install.locate_package(sys.executable, local_run)
    assert info.value.context['interpreter']['locations'] == []
    assert info.value.context['interpreter']['executable'] == sys.executable
