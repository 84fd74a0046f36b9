# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sglang._flags: the server flags of real SGLang releases, read from their source.

Inputs are the released wheels from the cache tests/sglang_wheels.py fills (offline here: a release missing from the
cache skips its tests, naming the command that fills it). The facts asserted here were checked by hand against each
release's server_args.py / arg_groups sources. The comparison with each release's REAL argparse parser (a venv with
torch from PyPI) is an integration test: tests/integration/test_sglang_flags_real_parser.py.
"""

from __future__ import annotations

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
from sglang_flag_cases import REAL, entry, server_args_for, wheel_loader_parse  # noqa: E402  pylint: disable=wrong-import-position


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
    _unknown, problems = sf.check_args(server_args_for(version), wheel_loader_parse(version))
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


@pytest.mark.parametrize('version', REAL)
def test_a_dict_for_a_number_is_refused_as_the_json_word_it_would_be(version):
    """A reviewer's tp-size {a: 1} passed --check and was written to the unit as --tp-size {"a":1}."""
    parsed = wheel_loader_parse(version)
    _unknown, problems = sf.check_args({'model-path': 'm', 'tp-size': {'a': 1}}, parsed)
    assert problems == ['--tp-size expects an integer, not \'{"a":1}\' (%s)' % parsed['values']['--tp-size']['source']]
    # a flag that takes JSON text (its own parser, not checked) still takes a dict
    assert sf.check_args({'model-path': 'm', 'json-model-override-args': {'a': 1}}, parsed) == ([], [])


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
