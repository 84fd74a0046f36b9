# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sglang._flags: the server flags of real SGLang releases, read from their source.

Inputs are the released wheels from PyPI (tests/sglang_wheels.py, cached; fails, never skips, without PyPI).
The facts asserted here were checked by hand against each release's server_args.py / arg_groups sources.
The last part builds each release's REAL argparse parser (tests/sglang_argparse_env.py: a venv with torch and
the light packages server_args imports, ``pip install --no-deps sglang==X``) and compares it with the source
reading, then feeds it command lines rendered by the sglang_cli_args filter.
"""

from __future__ import annotations

import functools
import sys
import zipfile
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.sglang_args import sglang_cli_args
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _flags as sf

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position
import sglang_argparse_env  # noqa: E402  pylint: disable=wrong-import-position


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


# (flag, last release without it, first release with it), checked against the released sources
INTRODUCED = [
    ('--model', '0.4.8', '0.4.8.post1'),
    ('--enable-flashinfer-allreduce-fusion', '0.4.8.post1', '0.4.9'),
    ('--config', '0.5.2', '0.5.3'),
    ('--enforce-disable-flashinfer-allreduce-fusion', '0.5.9', '0.5.10'),
    ('--flashinfer-allreduce-fusion-backend', '0.5.13', '0.5.14'),
]
LATER = ['0.5.18', '0.5.23']


@pytest.mark.parametrize('flag, before, first', INTRODUCED)
def test_flag_appears_in_the_release_that_introduced_it(flag, before, first):
    assert flag not in wheel_loader_parse(before)['flags']
    assert flag in wheel_loader_parse(first)['flags']
    for later in LATER:
        assert flag in wheel_loader_parse(later)['flags'], later


ALL = ['0.4.10', '0.5.9', '0.5.10', '0.5.14', '0.5.18', '0.5.23']


@pytest.mark.parametrize('version', ALL)
def test_aliases_share_one_argument(version):
    parsed = wheel_loader_parse(version)
    tp = entry(parsed, '--tp-size')
    assert set(tp['flags']) == {'--tp-size', '--tensor-parallel-size'}
    # up to 0.5.13: add_argument("--tensor-parallel-size", "--tp-size") without dest, so argparse names it after the
    # first long flag; from 0.5.14 the field tp_size with Arg(aliases=["--tensor-parallel-size"])
    assert tp['dest'] == ('tp_size' if version in ('0.5.14', '0.5.18', '0.5.23') else 'tensor_parallel_size')
    dist = entry(parsed, '--dist-init-addr')
    assert set(dist['flags']) == {'--dist-init-addr', '--nccl-init-addr'} and dist['dest'] == 'dist_init_addr'
    # argparse would accept the abbreviation --tp; SGLang never defines it
    assert '--tp' not in parsed['flags']
    assert parsed['warnings'] == []


@pytest.mark.parametrize('version', ALL)
def test_switches_and_value_flags(version):
    parsed = wheel_loader_parse(version)
    for switch in ('--trust-remote-code', '--enable-flashinfer-allreduce-fusion', '--skip-server-warmup'):
        assert switch in parsed['boolean_flags'], switch
    for valued in ('--tp-size', '--model-path', '--mem-fraction-static', '--nnodes', '--node-rank'):
        assert valued in parsed['flags'] and valued not in parsed['boolean_flags'], valued
    # --cuda-graph-bs became --cuda-graph-bs-decode / --cuda-graph-bs-prefill (0.5.23)
    assert ('--cuda-graph-bs' in parsed['flags']) == (version != '0.5.23')
    assert set(parsed['boolean_flags']) <= set(parsed['flags'])
    assert parsed['flags'] == sorted(set(parsed['flags']))


def test_boolean_optional_action_adds_no_form():
    # 0.5.10 added --experts-shared-outer-loras with argparse.BooleanOptionalAction
    assert '--experts-shared-outer-loras' not in wheel_loader_parse('0.5.9')['flags']
    parsed = wheel_loader_parse('0.5.10')
    arg = entry(parsed, '--experts-shared-outer-loras')
    assert arg['flags'] == ['--experts-shared-outer-loras', '--no-experts-shared-outer-loras']
    assert not arg['takes_value'] and arg['action'] == 'BooleanOptionalAction'
    assert '--no-experts-shared-outer-loras' in parsed['boolean_flags']


def test_0_5_14_flags_from_annotated_dataclass_fields():
    parsed = wheel_loader_parse('0.5.14')
    arg = entry(parsed, '--enforce-disable-flashinfer-allreduce-fusion')
    assert arg['defined_by'] == 'field' and arg['source'].startswith('sglang/srt/server_args.py:')
    assert not arg['takes_value']
    backend = entry(parsed, '--flashinfer-allreduce-fusion-backend')
    assert backend['takes_value'] and backend['defined_by'] == 'field'
    # the deprecated spelling is registered by hand with a store_true action
    old = entry(parsed, '--enable-flashinfer-allreduce-fusion')
    assert old['defined_by'] == 'add_argument' and old['deprecated'] and not old['takes_value']
    assert 'sglang/srt/arg_groups/argparse_actions.py' in parsed['files']


def test_0_5_23_flags_from_namespace_classes():
    parsed = wheel_loader_parse('0.5.23')
    gate = entry(parsed, '--gated-launch-port')
    assert gate['source'].startswith('sglang/srt/arg_groups/fields/parallel.py:') and gate['dest'] == 'gated_launch_port'
    # Arg(cli_name="--fp8-gemm-backend") on the field fp8_gemm_runner_backend
    fp8 = entry(parsed, '--fp8-gemm-backend')
    assert fp8['dest'] == 'fp8_gemm_runner_backend' and '--fp8-gemm-runner-backend' not in parsed['flags']
    # disable_cuda_graph is Arg(no_cli=True); only the deprecated DeprecatedStoreTrueAction spelling exists
    cuda_graph = entry(parsed, '--disable-cuda-graph')
    assert cuda_graph['defined_by'] == 'add_argument' and cuda_graph['action'] == 'DeprecatedStoreTrueAction'
    assert '--disable-cuda-graph' in parsed['boolean_flags']
    # DeprecatedStoreConstAction defaults to nargs=0, but --monokernel-backend passes nargs=None: it takes a value
    mono = entry(parsed, '--monokernel-backend')
    assert mono['takes_value'] and mono['dest'] == 'enable_amd_monokernel'
    assert '--monokernel-backend' not in parsed['boolean_flags']
    assert any(f.startswith('sglang/srt/arg_groups/fields/') for f in parsed['files'])


def test_installed_tree_reads_like_the_wheel(tmp_path):
    """read_package_sources on an extracted release gives the same flags as reading the wheel."""
    wheel = sglang_wheels.wheel_path('0.5.23')
    with zipfile.ZipFile(str(wheel)) as zf:
        for name in zf.namelist():
            if name.startswith('sglang/srt/') and name.endswith('.py'):
                zf.extract(name, str(tmp_path))
    parsed = sf.parse_server_flags(sf.read_package_sources(str(tmp_path / 'sglang')))
    assert parsed['flags'] == wheel_loader_parse('0.5.23')['flags']
    assert parsed['boolean_flags'] == wheel_loader_parse('0.5.23')['boolean_flags']


# ---------------------------------------------------------------------------------------------------------------
# parsing rules on small sources
# ---------------------------------------------------------------------------------------------------------------

def test_follows_helpers_groups_and_imports():
    sources = {
        'sglang/srt/server_args.py': '''
import argparse
from sglang.srt.extra import add_extra
from typing import Optional

class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        group = parser.add_argument_group("x")
        group.add_argument("--a", "-a", type=int)
        ServerArgs._more(parser)
        add_extra(parser)
        argparse.ArgumentParser().parse_args  # not a call with the parser

    @staticmethod
    def _more(p):
        p.add_argument("--b", action="store_false", dest="bee")
''',
        'sglang/srt/extra.py': '''
def add_extra(parser):
    parser.add_argument("--c", nargs=0, action=Custom)
    parser.add_argument("--d", action="store_const", const=1)

class Custom:
    pass
''',
    }
    parsed = sf.parse_server_flags(sources)
    assert parsed['flags'] == ['--a', '--b', '--c', '--d', '-a']
    assert parsed['boolean_flags'] == ['--b', '--c', '--d']
    assert entry(parsed, '--b')['dest'] == 'bee'
    assert entry(parsed, '--c')['source'] == 'sglang/srt/extra.py:3'
    assert parsed['files'] == ['sglang/srt/extra.py', 'sglang/srt/server_args.py']


def test_unfollowable_delegation_is_reported():
    sources = {'sglang/srt/server_args.py': '''
from elsewhere import add_more

class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--a")
        add_more(parser)
        parser.add_argument(*NAMES)
'''}
    parsed = sf.parse_server_flags(sources)
    assert parsed['flags'] == ['--a']
    assert len(parsed['warnings']) == 2
    assert 'add_more()' in parsed['warnings'][0] and 'server_args.py:8' in parsed['warnings'][0]
    assert 'not a string literal' in parsed['warnings'][1]


def test_field_annotation_forms():
    sources = {'sglang/srt/server_args.py': '''
from __future__ import annotations
from typing import Annotated, Optional, Literal, ClassVar
from sglang.srt.arg_groups.arg_utils import A, Arg, add_cli_args_from_dataclass

class ServerArgs:
    plain: int = 1
    const: ClassVar[int] = 2
    on: A[bool, "help"] = False
    maybe: A[Optional[bool], "help"] = None
    piped: A["bool | None", "help"] = None
    level: Annotated[Literal["a", "b"], Arg(help="x", aliases=["--lvl"])] = "a"
    hidden: A[bool, Arg(no_cli=True)] = False
    renamed: A[int, Arg(cli_name="--short")] = 0
    toggled: A[bool, Arg(action=argparse.BooleanOptionalAction)] = True

    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
'''}
    parsed = sf.parse_server_flags(sources)
    assert parsed['flags'] == ['--level', '--lvl', '--maybe', '--no-toggled', '--on', '--piped', '--short', '--toggled']
    assert parsed['boolean_flags'] == ['--maybe', '--no-toggled', '--on', '--piped', '--toggled']
    assert entry(parsed, '--lvl')['choices'] == ['a', 'b']
    assert entry(parsed, '--short')['dest'] == 'renamed'


def test_missing_parser_definition_raises():
    with pytest.raises(sf.FlagSourceError, match='server_args.py is missing'):
        sf.parse_server_flags({})
    with pytest.raises(sf.FlagSourceError, match='has no ServerArgs.add_cli_args'):
        sf.parse_server_flags({'sglang/srt/server_args.py': 'class ServerArgs:\n    pass\n'})
    with pytest.raises(sf.FlagSourceError, match='syntax error at line 1'):
        sf.parse_server_flags({'sglang/srt/server_args.py': 'class ServerArgs(:\n'})


# ---------------------------------------------------------------------------------------------------------------
# checking user arguments
# ---------------------------------------------------------------------------------------------------------------

def test_check_args_against_0_5_9():
    parsed = wheel_loader_parse('0.5.9')
    args = {'model_path': 'm', '--tensor-parallel-size': 2, 'enforce-disable-flashinfer-allreduce-fusion': True,
            'trust-remote-code': 'yes', 'mem-fraction': 0.8}
    unknown, problems = sf.check_args(args, parsed)
    assert [u['flag'] for u in unknown] == ['--enforce-disable-flashinfer-allreduce-fusion', '--mem-fraction']
    assert unknown[0]['did_you_mean'][0] == '--enable-flashinfer-allreduce-fusion'
    assert '--mem-fraction-static' in unknown[1]['did_you_mean']
    assert problems == ["--trust-remote-code takes no value (it is a switch); give it true or false, not 'yes'"]
    msg = sf.unknown_message(unknown, '0.5.9')
    assert msg.startswith('the installed SGLang 0.5.9 does not define these flags: --enforce-disable-flashinfer-allreduce-fusion (did you mean '
                          '--enable-flashinfer-allreduce-fusion')
    # the same arguments are fine for 0.5.10 apart from the misspelt one
    unknown, _problems = sf.check_args(args, wheel_loader_parse('0.5.10'))
    assert [u['flag'] for u in unknown] == ['--mem-fraction']


# ---------------------------------------------------------------------------------------------------------------
# the REAL argparse parser of installed releases
# ---------------------------------------------------------------------------------------------------------------

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


def _server_args(version):
    args = dict(SERVER_ARGS)
    if '--cuda-graph-bs' not in wheel_loader_parse(version)['flags']:
        args = dict((('cuda-graph-bs-decode' if k == 'cuda-graph-bs' else k), v) for k, v in args.items())
    return args


BAD_WORD = 'not-a-choice'


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


@functools.lru_cache(maxsize=None)
def real(version):
    argv = sglang_cli_args(_server_args(version))
    cases = [argv, sglang_cli_args(NEW_FLAG), sglang_cli_args(BAD_SWITCH), ['--model-path', 'm', '--tp', '2']]
    # from index 4: one flag and value each (value_cases), checked against what our check says of it
    cases += [['--model-path', 'm', flag, word] for flag, word in value_cases(version)]
    try:
        return argv, sglang_argparse_env.real_parser(version, cases)
    except (RuntimeError, sglang_wheels.WheelUnavailable) as exc:
        pytest.fail(str(exc))


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
    assert sglang_cli_args(_server_args(version), known_flags=parsed['flags'], boolean_flags=parsed['boolean_flags']) == argv
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


# ---------------------------------------------------------------------------------------------------------------
# values: the type and choices each flag's definition gives argparse, read from the released sources
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('version', REAL)
def test_value_types_read_from_the_source(version):
    values = wheel_loader_parse(version)['values']
    assert values['--tp-size']['type'] == 'int' and values['--tensor-parallel-size'] == values['--tp-size']
    assert values['--mem-fraction-static']['type'] == 'float'
    assert values['--port']['type'] == 'int'
    # a flag with a custom parser (json.loads) is not checked
    assert '--json-model-override-args' not in values


@pytest.mark.parametrize('version', REAL)
def test_arguments_argparse_accepts_pass_the_value_check(version):
    _unknown, problems = sf.check_args(_server_args(version), wheel_loader_parse(version))
    assert problems == []


@pytest.mark.parametrize('version', REAL)
def test_bad_values_name_flag_value_and_what_it_expects(version):
    parsed = wheel_loader_parse(version)
    where = parsed['values']['--tp-size']['source']
    args = {'model-path': 'm', 'tp-size': 'eight', 'mem-fraction-static': '85%', 'port': 30000.5, 'max-running-requests': True,
            'nnodes': [2, 3]}
    _unknown, problems = sf.check_args(args, parsed)
    assert problems == [
        "--tp-size expects an integer, not 'eight' (%s)" % where,
        "--mem-fraction-static expects a number, not '85%%' (%s)" % parsed['values']['--mem-fraction-static']['source'],
        "--port expects an integer, not 30000.5 (%s)" % parsed['values']['--port']['source'],
        '--max-running-requests takes a value (an integer); true would give the bare flag',
        '--nnodes takes one value (an integer), not a list',
    ]
    # the filter refuses the same value with the same words
    with pytest.raises(AnsibleFilterError, match=r"--tp-size expects an integer, not 'eight'"):
        sglang_cli_args({'tp-size': 'eight'}, known_flags=parsed['flags'], flag_values=parsed['values'])


def test_choices_read_from_the_source():
    parsed = wheel_loader_parse('0.5.9')
    spec = parsed['values']['--load-format']
    assert 'safetensors' in spec['choices'] and 'auto' in spec['choices']
    _unknown, problems = sf.check_args({'load-format': 'safetensor'}, parsed)
    assert problems == ["--load-format must be one of %s, not 'safetensor' (%s)" % (', '.join(spec['choices']), spec['source'])]
    assert sf.check_args({'load-format': 'safetensors'}, parsed) == ([], [])


# ---------------------------------------------------------------------------------------------------------------
# values: our reading of types and choices against the REAL parser of each release
# ---------------------------------------------------------------------------------------------------------------

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
