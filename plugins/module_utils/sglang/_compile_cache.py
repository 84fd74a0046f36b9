# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Persistent compile, JIT and autotune caches of an SGLang server: one directory per SGLang version and GPU
architecture, the environment that points SGLang and its libraries at it, and pruning of old ones.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

MARKER = '.llmops-sglang-cache.json'  # only directories holding it are ever pruned

# Environment variable -> sub-directory, and the source that reads the variable (docs/sglang_service.md, "Warm caches").
CACHE_VARIABLES = (
    # sglang/srt/layers/deep_gemm_wrapper/compile_utils.py sets DG_JIT_CACHE_DIR (DeepGEMM's JIT cache) from it;
    # declared in sglang/srt/environ.py (default ~/.cache/deep_gemm)
    ('SGLANG_DG_CACHE_DIR', 'deep_gemm'),
    # sglang/srt/compilation/backend.py: torch_compile_cache/<hash> (piecewise CUDA graphs, --enable-torch-compile)
    ('SGLANG_CACHE_DIR', 'sglang'),
    # torch/_inductor/runtime/cache_dir_utils.py cache_dir(): default /tmp/torchinductor_<user>, which the unit's
    # PrivateTmp=yes empties on every restart
    ('TORCHINDUCTOR_CACHE_DIR', 'inductor'),
    # triton/knobs.py cache_knobs.dir (triton/runtime/cache.py before 3.4): default ~/.triton/cache
    ('TRITON_CACHE_DIR', 'triton'),
    # flashinfer/jit/env.py FLASHINFER_BASE_DIR: JIT modules under <base>/.cache/flashinfer/<cuda archs>/cached_ops
    ('FLASHINFER_WORKSPACE_BASE', 'flashinfer'),
    # CUDA driver JIT cache of PTX compiled for this GPU (CUDA C++ Programming Guide, CUDA environment variables):
    # default ~/.nv/ComputeCache
    ('CUDA_CACHE_PATH', 'cuda'),
)
_SAFE = re.compile(r'[^A-Za-z0-9._+-]')


# The options of llmops.sglang.sglang_compile_cache, also sglang_service_layout's compile_cache suboptions
OPTIONS = dict(root=dict(type='path', required=True), version=dict(type='str', required=True), arch=dict(type='str'),
               owner=dict(type='str'), group=dict(type='str'), keep=dict(type='int', default=3),
               environment=dict(type='dict', default={}))


class CacheError(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg


def gpu_arch(nvidia_smi_output):
    """``sm90`` from ``nvidia-smi --query-gpu=compute_cap --format=csv,noheader`` output (``9.0`` per GPU); several
    architectures joined with ``-``; None when there is no GPU line."""
    caps = sorted(set(line.strip() for line in (nvidia_smi_output or '').splitlines() if re.match(r'^\d+\.\d+$', line.strip())))
    return '-'.join('sm' + cap.replace('.', '') for cap in caps) or None


def version_dir_name(version, arch):
    """``0.5.9-sm90``: one directory per SGLang version and GPU architecture (``0.5.9`` without a GPU)."""
    name = _SAFE.sub('_', version) + ('-' + _SAFE.sub('_', arch) if arch else '')
    if name in ('', '.', '..'):
        raise CacheError('cannot name a cache directory after SGLang version %r' % version)
    return name


@dataclass
class CachePlan:
    """What the cache root should look like: the directories to create, the environment, what to prune."""

    path: str
    dirs: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    create: List[str] = field(default_factory=list)
    prune: List[str] = field(default_factory=list)
    kept: List[str] = field(default_factory=list)

    def to_json(self):
        return asdict(self)


def read_marker(path):
    try:
        with open(os.path.join(path, MARKER), 'r', encoding='utf-8') as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) and isinstance(data.get('created'), (int, float)) else None
    except (OSError, ValueError):
        return None


def plan(root, name, user_environment, keep, existing):
    """Decide. ``existing``: {directory name: marker or None} under ``root`` now. The current directory is always
    kept; of the other marked directories the ``keep - 1`` newest (by creation) stay, the rest are pruned.
    Variables the user set in ``user_environment`` are left alone (their paths are still reported in ``dirs``)."""
    current = os.path.join(root, name)
    dirs, environment = {}, {}
    for variable, sub in CACHE_VARIABLES:
        if user_environment.get(variable):
            dirs[sub] = str(user_environment[variable])
        else:
            dirs[sub] = environment[variable] = os.path.join(current, sub)
    create = [current] + [environment[v] for v, _sub in CACHE_VARIABLES if v in environment]
    others = sorted((marker.get('created', 0), other) for other, marker in existing.items() if marker and other != name)
    keep_others = max(0, keep - 1)
    kept = [other for _created, other in others[len(others) - keep_others:]] if keep_others else []
    prune = [os.path.join(root, other) for _created, other in others if other not in kept]
    return CachePlan(path=current, dirs=dirs, environment=environment, create=create, prune=prune,
                     kept=sorted([name] + kept))


def scan(root):
    """{directory name: marker or None} of the directories under ``root`` (empty when it does not exist)."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise CacheError('cannot list the cache root %s: %s' % (root, err))
    return dict((n, read_marker(os.path.join(root, n))) for n in names if os.path.isdir(os.path.join(root, n)))


def missing(cache_plan):
    """The directories of the plan that do not exist yet."""
    return [d for d in cache_plan.create if not os.path.isdir(d)]


def apply(cache_plan, version, arch, uid, gid, now):
    """Create the missing directories (owned by uid:gid, mode 0750) with the marker, then prune. Never removes a
    directory without the marker (only directories this collection created)."""
    for directory in missing(cache_plan):
        os.makedirs(directory, mode=0o750, exist_ok=True)
        os.chown(directory, uid, gid)
    marker = os.path.join(cache_plan.path, MARKER)
    if not os.path.exists(marker):
        with open(marker, 'w', encoding='utf-8') as handle:
            json.dump({'version': version, 'arch': arch, 'created': now}, handle)
    for directory in cache_plan.prune:
        if read_marker(directory) is not None:
            shutil.rmtree(directory)


def owner_of(path):
    st = os.stat(path)
    return st.st_uid, st.st_gid


def describe(cache_plan, arch: Optional[str]):
    return '%s (%s)%s' % (cache_plan.path, 'GPU %s' % arch if arch else 'no GPU seen',
                          '; pruned %s' % ', '.join(os.path.basename(p) for p in cache_plan.prune) if cache_plan.prune else '')


def detect_arch(nvidia_smi: Optional[str], run: Callable) -> Optional[str]:
    """The GPU architecture from ``nvidia-smi`` (its path, or None where the host has none); None without a GPU."""
    if not nvidia_smi:
        return None
    rc, out, _err = run([nvidia_smi, '--query-gpu=compute_cap', '--format=csv,noheader'])
    return gpu_arch(out) if rc == 0 else None


def ids(owner: Optional[str], group: Optional[str], check_mode: bool) -> Optional[Tuple[int, int]]:
    """uid, gid of owner/group (default: the user running it and its primary group); None in check mode when the user
    does not exist yet (the role creates it first)."""
    try:
        entry = pwd.getpwnam(owner) if owner else pwd.getpwuid(os.getuid())
        gid = grp.getgrnam(group).gr_gid if group else entry.pw_gid
        return entry.pw_uid, gid
    except KeyError:
        if check_mode:
            return None
        raise CacheError('owner %r or group %r does not exist on the host; create the service user first' % (owner, group))


def prepare(spec: Dict[str, Any], check_mode: bool, run: Callable, which: Callable[[str], Optional[str]],
            want_diff: bool = False) -> Tuple[Dict[str, Any], Optional[Dict[str, str]]]:
    """The cache directories of ``spec`` (the options of llmops.sglang.sglang_compile_cache: root, version, arch, owner,
    group, keep, environment), created and pruned unless ``check_mode``. The GPU architecture is ``spec['arch']``, or
    what ``nvidia-smi`` (found with ``which``, run with ``run``) reports. Returns the module's result (changed, path,
    arch, environment, dirs, created, pruned, msg) and, when ``want_diff``, the diff of the root's directories (else
    None). Raises CacheError."""
    arch = spec['arch'] if spec.get('arch') is not None else detect_arch(which('nvidia-smi'), run)
    root = spec['root']
    if spec['keep'] < 1:
        raise CacheError('keep must be 1 or more (the current cache directory is always kept), got %d' % spec['keep'])
    try:
        existing = scan(root)
        cache_plan = plan(root, version_dir_name(spec['version'], arch), spec['environment'] or {}, spec['keep'], existing)
        created = missing(cache_plan)
        changed = bool(created or cache_plan.prune)
        owner = ids(spec.get('owner'), spec.get('group'), check_mode)
        if changed and not check_mode:
            if not os.path.isdir(root):
                os.makedirs(root, mode=0o755)
            apply(cache_plan, spec['version'], arch, owner[0], owner[1], time.time())
    except OSError as err:
        raise CacheError('cannot prepare the cache directories under %s: %s. Run the task as root (become: true).' % (root, err))
    result = dict(changed=changed, path=cache_plan.path, arch=arch, environment=cache_plan.environment, dirs=cache_plan.dirs,
                  created=created, pruned=cache_plan.prune, msg=describe(cache_plan, arch))
    if not want_diff:
        return result, None
    after = sorted((set(existing) | {os.path.basename(cache_plan.path)}) - set(os.path.basename(d) for d in cache_plan.prune))
    diff = dict(before='\n'.join(sorted(existing)) + '\n' if existing else '', after='\n'.join(after) + '\n',
                before_header=root, after_header=root)
    return result, diff
