# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The server flags of real SGLang releases read from their source, and the command lines the flag tests use: shared
by the unit tests (tests/unit/plugins/filter/test_sglang_flags.py, the cached wheels only) and the comparison with each
release's real argparse parser (tests/integration/test_sglang_flags_real_parser.py, a venv with torch from PyPI)."""

from __future__ import annotations

import functools

import pytest

import sglang_wheels


@functools.lru_cache(maxsize=None)
def wheel_loader_parse(version):
    try:
        return sglang_wheels.server_flags(version)
    except sglang_wheels.WheelUnavailable as exc:
        pytest.fail('SGLang %s is needed from PyPI for this test and could not be fetched:\n%s' % (version, exc))


def entry(parsed, flag):
    found = [a for a in parsed['arguments'] if flag in a['flags']]
    assert len(found) == 1, (flag, found)
    return found[0]


# the releases whose real parser the integration tests build
REAL = ['0.4.10', '0.5.9', '0.5.14', '0.5.23']

SERVER_ARGS = {
    'model-path': '/models/GLM 4.5 Air',
    'tp_size': 2,
    'trust-remote-code': True,
    'disable-radix-cache': False,
    'mem-fraction-static': 0.82,
    'cuda-graph-bs': [1, 2, 4],  # --cuda-graph-bs-decode from 0.5.23, see _server_args()
    'json-model-override-args': {'rope_scaling': {'type': 'yarn', 'factor': 4}},
    'served-model-name': 'glm "air"',
    'dist-init-addr': '10.0.0.1:5000',
    'nnodes': 2,
    'node-rank': 1,
    'enable-flashinfer-allreduce-fusion': True,
}
NEW_FLAG = {'model-path': 'm', 'enforce-disable-flashinfer-allreduce-fusion': True}
BAD_SWITCH = {'model-path': 'm', 'trust-remote-code': 'false'}

BAD_WORD = 'not-a-choice'


def server_args_for(version):
    args = dict(SERVER_ARGS)
    if '--cuda-graph-bs' not in wheel_loader_parse(version)['flags']:
        args = dict((('cuda-graph-bs-decode' if k == 'cuda-graph-bs' else k), v) for k, v in args.items())
    return args


@functools.lru_cache(maxsize=None)
def value_cases(version):
    """``(flag, word)`` for every flag whose values we check: each of its choices, and values its type refuses (a
    word for int and float, a fraction for int), a value outside its choices; one command line each, below."""
    cases = []
    for flag, spec in sorted(wheel_loader_parse(version)['values'].items()):
        words = [str(c) for c in spec['choices'] or []]
        words += {'int': ['8', 'eight', '1.5'], 'float': ['0.85', '85%']}.get(spec['type'], [])
        if spec['choices']:
            words.append(BAD_WORD if spec['type'] in ('str', 'custom') else '987654321')
        cases.extend((flag, word) for word in words)
    return cases
