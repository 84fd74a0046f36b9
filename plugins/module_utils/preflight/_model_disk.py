# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The model an SGLang server will load and the disk it needs: a local model path that exists, a hub model id that is
in the Hugging Face cache when the server runs offline, its revision, and the free space where the model and the caches
live. Paths follow huggingface_hub's cache layout (``<cache>/models--org--name/{refs,snapshots}``). Standard library
only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import os
import re

_TRUE = ('1', 'true', 'yes', 'on')
_HUB_ID_RE = re.compile(r'^[\w.-]+/[\w.-]+$')
_COMMIT_RE = re.compile(r'^[0-9a-f]{40}$')


def _flags(server_args):
    return dict((str(key).lstrip('-').replace('_', '-'), value) for key, value in (server_args or {}).items())


def hub_cache(environment):
    """The Hugging Face hub cache directory the server will use (HF_HUB_CACHE, HF_HOME/hub, $HOME/.cache/...)."""
    env = environment or {}
    if env.get('HF_HUB_CACHE'):
        return env['HF_HUB_CACHE']
    if env.get('HF_HOME'):
        return os.path.join(env['HF_HOME'], 'hub')
    return os.path.join(env.get('HOME') or os.path.expanduser('~'), '.cache', 'huggingface', 'hub')


def offline(environment):
    env = environment or {}
    return any(str(env.get(name, '')).strip().lower() in _TRUE for name in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE'))


def model_of(server_args, working_directory):
    """{'model', 'kind' (local|hub|none), 'path' (local), 'revision' (asked)} of the server's --model-path."""
    flags = _flags(server_args)
    model = flags.get('model-path') or flags.get('model')
    if not model:
        return {'model': None, 'kind': 'none', 'path': None, 'revision': None}
    model = str(model)
    path = model if os.path.isabs(model) else os.path.join(working_directory or '/', model)
    local = model.startswith(('/', './', '../', '~')) or not _HUB_ID_RE.match(model) or os.path.exists(path)
    return {'model': model, 'kind': 'local' if local else 'hub', 'path': os.path.expanduser(path) if local else None,
            'revision': flags.get('revision')}


def cached_revision(cache, model_id, revision=None):
    """(commit, snapshot dir) of MODEL_ID in the hub cache for REVISION (a branch, tag or commit; default main), or
    (None, None) when that revision is not there."""
    repo = os.path.join(cache, 'models--' + model_id.replace('/', '--'))
    wanted = revision or 'main'
    commit = wanted if _COMMIT_RE.match(wanted) else None
    if commit is None:
        try:
            with open(os.path.join(repo, 'refs', wanted)) as handle:
                commit = handle.read().strip()
        except OSError:
            return None, None
    snapshot = os.path.join(repo, 'snapshots', commit)
    return (commit, snapshot) if os.path.isdir(snapshot) and os.listdir(snapshot) else (None, None)


def existing_ancestor(path):
    path = os.path.abspath(path)
    while not os.path.exists(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path


def free_space(paths):
    """[{'path', 'free_bytes', 'device'}] once per file system, for the nearest existing ancestor of each path."""
    seen = {}
    for path in paths:
        where = existing_ancestor(path)
        try:
            info = os.statvfs(where)
            device = os.stat(where).st_dev
        except OSError:
            continue
        if device not in seen:
            seen[device] = {'path': where, 'free_bytes': info.f_bavail * info.f_frsize, 'device': device}
    return list(seen.values())


def local_revision(path):
    """A local model's revision when it is a hub snapshot directory (.../snapshots/<commit>), else None."""
    parent, name = os.path.split(os.path.normpath(path))
    return name if os.path.basename(parent) == 'snapshots' and _COMMIT_RE.match(name) else None
