# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's identity on the target (_collection): the version the modules report is galaxy.yml's, and the
code digest follows the source of the modules it is given, loaded from files or from a zip as AnsiballZ ships them."""

from __future__ import annotations

import importlib
import re
import sys
import types
import zipfile
from pathlib import Path

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _collection

ROOT = Path(__file__).resolve().parents[4]


def test_version_is_galaxy_yml_version():
    galaxy = (ROOT / 'galaxy.yml').read_text('utf-8')
    assert re.search(r'^version:\s*"?([^"\s]+)"?\s*$', galaxy, re.M).group(1) == _collection.VERSION


def _load(tmp_path, name, source, zipped):
    if zipped:
        archive = tmp_path / ('%s.zip' % name)
        with zipfile.ZipFile(str(archive), 'w') as handle:
            handle.writestr('%s.py' % name, source)
        sys.path.insert(0, str(archive))
    else:
        (tmp_path / ('%s.py' % name)).write_text(source)
        sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)
        sys.modules.pop(name, None)


def test_code_digest_follows_the_source_from_files_and_zips(tmp_path):
    a = _load(tmp_path, 'llmops_digest_a', 'X = 1\n', zipped=False)
    a_zip = _load(tmp_path, 'llmops_digest_a', 'X = 1\n', zipped=True)
    b = _load(tmp_path, 'llmops_digest_b', 'X = 1\n', zipped=True)
    (tmp_path / 'v2').mkdir()
    b2 = _load(tmp_path / 'v2', 'llmops_digest_b', 'X = 2\n', zipped=True)
    digest = _collection.code_digest([a, b])
    assert len(digest) == 64
    assert _collection.code_digest([b, a]) == digest
    assert _collection.code_digest([a_zip, b]) == digest
    assert _collection.code_digest([a, b2]) != digest


class _BytesLoader:
    """A loader whose get_source returns bytes, as Ansible's collection loader does under ansible-test units."""

    def __init__(self, module):
        self.module = module

    def get_source(self, name):
        return self.module.__loader__.get_source(name).encode('utf-8')


def test_code_digest_takes_source_as_bytes_too(tmp_path):
    text = _load(tmp_path, 'llmops_digest_c', 'X = "\u00e9"\n', zipped=False)
    as_bytes = types.SimpleNamespace(__name__=text.__name__, __loader__=_BytesLoader(text))
    assert _collection.code_digest([as_bytes]) == _collection.code_digest([text])
