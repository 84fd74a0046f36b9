# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The server flags our source reading finds, against each release's REAL argparse parser.

tests/sglang_argparse_env.py builds a venv with torch and the light packages server_args imports (PyPI, about 5 GB,
cached under ~/.cache/llmops-sglang), ``pip install --no-deps sglang==X`` of the cached wheel, and dumps the parser's
actions and what it makes of each command line; the unit tests (tests/unit/plugins/filter/test_sglang_flags.py) read
the same releases from their source alone, offline. Here: the flags, switches, destinations, value types, choices and
nargs agree, command lines rendered by the sglang_cli_args filter parse, and every value we refuse the parser refuses.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.sglang_args import sglang_cli_args
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _flags as sf

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
import sglang_argparse_env  # noqa: E402  pylint: disable=wrong-import-position
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position
from sglang_flag_cases import (  # noqa: E402  pylint: disable=wrong-import-position
    BAD_SWITCH, NEW_FLAG, REAL, SERVER_ARGS, entry, server_args_for, value_cases, wheel_loader_parse)


# Each release's parser is built once per session: the dump below (one interpreter importing torch, then SGLang's
# server_args of each release in a fork of it) is cached per process, so the file runs on one xdist worker
# (--dist loadgroup); spread over CI's 3 workers, every worker built every release's parser again.
pytestmark = pytest.mark.xdist_group('test_sglang_flags_real_parser')


@functools.lru_cache(maxsize=None)
def cases_of(version):
    argv = sglang_cli_args(server_args_for(version))
    cases = [argv, sglang_cli_args(NEW_FLAG), sglang_cli_args(BAD_SWITCH), ['--model-path', 'm', '--tp', '2']]
    # from index 4: one flag and value each (value_cases), checked against what our check says of it
    cases += [['--model-path', 'm', flag, word] for flag, word in value_cases(version)]
    return argv, cases


@functools.lru_cache(maxsize=None)
def real_parsers():
    """Every release's real parser, built in one interpreter that imports torch once (sglang_argparse_env)."""
    return sglang_argparse_env.real_parsers(dict((version, cases_of(version)[1]) for version in REAL))


def real(version):
    try:
        results, errors = real_parsers()
    except (RuntimeError, sglang_wheels.WheelUnavailable) as exc:
        pytest.fail(str(exc))
    if version in errors:
        pytest.fail(errors[version])
    return cases_of(version)[0], results[version]


@pytest.mark.parametrize('version', REAL)
def test_source_reading_equals_the_real_parser(version):
    _argv, got = real(version)
    parsed = wheel_loader_parse(version)
    real_flags = sorted(f for a in got['actions'] for f in a['flags'])
    real_switches = sorted(f for a in got['actions'] if a['nargs'] == 0 for f in a['flags'])
    assert parsed['flags'] == real_flags
    assert parsed['boolean_flags'] == real_switches
    real_dest = dict((f, a['dest']) for a in got['actions'] for f in a['flags'])
    ours_dest = dict((f, a['dest']) for a in parsed['arguments'] for f in a['flags'])
    assert ours_dest == real_dest


@pytest.mark.parametrize('version', REAL)
def test_rendered_argv_parses_with_the_real_parser(version):
    argv, got = real(version)
    parsed = wheel_loader_parse(version)
    # the checked rendering is the same argv
    assert sglang_cli_args(server_args_for(version), known_flags=parsed['flags'], boolean_flags=parsed['boolean_flags']) == argv
    # the 0.5.9 dict is wrong for 0.5.23 and the check says so before SGLang would
    if version == '0.5.23':
        with pytest.raises(AnsibleFilterError, match=r'--cuda-graph-bs \(did you mean --cuda-graph-bs-decode'):
            sglang_cli_args(SERVER_ARGS, known_flags=parsed['flags'])
    result = got['parsed'][0]
    assert result['ok'], result
    values = result['values']
    assert values['model_path'] == '/models/GLM 4.5 Air'
    # the dest argparse stores --tp-size under (tensor_parallel_size up to 0.5.13), as read from the source
    assert values[entry(parsed, '--tp-size')['dest']] == 2
    assert values['trust_remote_code'] is True
    assert values['disable_radix_cache'] is False
    assert values['mem_fraction_static'] == 0.82
    assert values.get('cuda_graph_bs', values.get('cuda_graph_bs_decode')) == [1, 2, 4]
    assert values['json_model_override_args'] == '{"rope_scaling":{"factor":4,"type":"yarn"}}'
    assert values['served_model_name'] == 'glm "air"'
    assert values['dist_init_addr'] == '10.0.0.1:5000'
    assert (values['nnodes'], values['node_rank']) == (2, 1)


@pytest.mark.parametrize('version', REAL)
def test_unknown_flag_agrees_with_the_real_parser(version):
    _argv, got = real(version)
    parsed = wheel_loader_parse(version)
    real_accepts = got['parsed'][1]['ok']
    if real_accepts:
        assert sglang_cli_args(NEW_FLAG, known_flags=parsed['flags']) == ['--model-path', 'm', '--enforce-disable-flashinfer-allreduce-fusion']
    else:
        assert got['parsed'][1]['code'] == 2
        with pytest.raises(AnsibleFilterError, match='--enforce-disable-flashinfer-allreduce-fusion'):
            sglang_cli_args(NEW_FLAG, known_flags=parsed['flags'])
    # the flag arrived in 0.5.10
    assert real_accepts == (version not in ('0.4.10', '0.5.9'))


@pytest.mark.parametrize('version', REAL)
def test_switch_with_a_string_is_caught_before_the_real_parser_rejects_it(version):
    _argv, got = real(version)
    parsed = wheel_loader_parse(version)
    # unchecked, 'false' becomes a stray word that argparse rejects ("unrecognized arguments: false")
    assert sglang_cli_args(BAD_SWITCH) == ['--model-path', 'm', '--trust-remote-code', 'false']
    assert got['parsed'][2] == {'ok': False, 'code': 2}
    with pytest.raises(AnsibleFilterError, match=r'--trust-remote-code takes no value \(it is a switch\)'):
        sglang_cli_args(BAD_SWITCH, known_flags=parsed['flags'], boolean_flags=parsed['boolean_flags'])


@pytest.mark.parametrize('version', REAL)
def test_abbreviation_is_rejected_although_argparse_may_take_it(version):
    _argv, got = real(version)
    parsed = wheel_loader_parse(version)
    # the flag that the abbreviation expands to comes first among the suggestions
    with pytest.raises(AnsibleFilterError, match=r'--tp \(did you mean --tp-size'):
        sglang_cli_args({'tp': 2}, known_flags=parsed['flags'])
    # whether argparse takes the prefix depends on which other flags start with --tp in that release
    prefixed = [f for f in parsed['flags'] if f.startswith('--tp')]
    assert got['parsed'][3]['ok'] == (prefixed == ['--tp-size'])


def _real_actions(got):
    return dict((f, a) for a in got['actions'] for f in a['flags'])


@pytest.mark.parametrize('version', REAL)
def test_value_types_and_choices_equal_the_real_parser(version):
    """For every flag we check, argparse has the same type (int, float, str or a parser of SGLang's own), choices
    and nargs as we read from the source."""
    _argv, got = real(version)
    actions = _real_actions(got)
    values = wheel_loader_parse(version)['values']
    assert len(values) > 80  # 0.4.10 has 86, 0.5.23 249 (aliases counted)
    differ = {}
    for flag, spec in values.items():
        action = actions[flag]
        real_type = 'str' if action['type'] is None else action['type']  # argparse keeps the word as it is
        if (spec['type'], spec['choices'], spec['nargs']) != (real_type, action['choices'], action['nargs']):
            differ[flag] = {'ours': (spec['type'], spec['choices'], spec['nargs']),
                            'real': (real_type, action['choices'], action['nargs'])}
    assert differ == {}


@pytest.mark.parametrize('version', REAL)
def test_values_we_refuse_the_real_parser_refuses(version):
    """Every value our check refuses exits argparse with code 2; every value it accepts parses."""
    _argv, got = real(version)
    values = wheel_loader_parse(version)['values']
    outcomes = got['parsed'][4:]
    cases = value_cases(version)
    assert len(outcomes) == len(cases)
    disagree = []
    refused = 0
    for (flag, word), outcome in zip(cases, outcomes):
        ours_ok = sf.value_problem(flag, values[flag], word) is None
        refused += not ours_ok
        if ours_ok != outcome['ok'] or (not outcome['ok'] and outcome['code'] != 2):
            disagree.append((flag, word, ours_ok, outcome))
    assert disagree == []
    # both kinds were tried: values refused for their type and for their choices
    assert refused >= len([f for f, s in values.items() if s['type'] in ('int', 'float') or s['choices']])
