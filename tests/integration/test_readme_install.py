# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""README's install commands ("Use it on your GPU hosts"), run as written in the checkout with the real
ansible-galaxy: the install of the checkout and the build-then-install of the tarball both give a collection that
ansible-doc reads (its role, its stdout callback). Only /tmp is replaced by a test directory, and HOME and the
collections path point into it (PYTHONPATH is dropped, as a user has none), so nothing of the machine's ~/.ansible is
touched.

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_readme_install.py
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = os.path.dirname(sys.executable)


def readme_galaxy_commands():
    text = (ROOT / 'README.md').read_text(encoding='utf-8')
    use = text[text.index('\n## Use it on your GPU hosts\n'):]
    use = use[:use.index('\n## ', 1)]
    lines = [line.split('#')[0].strip() for block in re.findall(r'^```bash\n(.*?)^```', use, re.M | re.S)
             for line in block.splitlines()]
    return [line for line in lines if line.startswith('ansible-galaxy ')]


def run(cmd, tmp_path, collections):
    argv = shlex.split(cmd.replace('/tmp', str(tmp_path / 'tmp')))
    argv[0] = shutil.which(argv[0], path=BIN) or argv[0]
    env = dict(os.environ, HOME=str(tmp_path / 'home'), ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR='1')
    # as a user runs them: the test run's own collection on PYTHONPATH would count as installed already
    env.pop('PYTHONPATH', None)
    proc = subprocess.run(argv, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, (cmd, proc.stdout, proc.stderr)
    return env


def test_readme_install_commands_install_the_checkout(tmp_path):
    commands = readme_galaxy_commands()
    assert len(commands) == 3, commands
    (tmp_path / 'tmp').mkdir()
    version = None
    for i, cmd in enumerate(commands):
        # each install into its own collections path: the checkout's, then the tarball's
        collections = tmp_path / ('collections-%d' % i)
        env = run(cmd, tmp_path, collections)
        if ' install ' not in cmd:
            continue
        installed = collections / 'ansible_collections' / 'llmops' / 'sglang'
        manifest = json.loads((installed / 'MANIFEST.json').read_text())
        version = version or manifest['collection_info']['version']
        assert manifest['collection_info']['version'] == version
        for kind, name in (('role', 'llmops.sglang.sglang_service'), ('callback', 'llmops.sglang.brief')):
            doc = subprocess.run([shutil.which('ansible-doc', path=BIN) or 'ansible-doc', '-t', kind, '--json', name],
                                 env=env, capture_output=True, text=True, timeout=300, check=False)
            assert doc.returncode == 0 and name in json.loads(doc.stdout), (kind, doc.stderr)
