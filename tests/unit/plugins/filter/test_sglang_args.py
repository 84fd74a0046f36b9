# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import shlex

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.sglang_args import sglang_cli_args, systemd_exec_args
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._flags import check_args, duplicate_keys, duplicate_message


@pytest.mark.parametrize('args, argv', [
    ({'model-path': 'zai-org/GLM-5-FP8', 'tp_size': 8}, ['--model-path', 'zai-org/GLM-5-FP8', '--tp-size', '8']),
    ({'--trust-remote-code': True, 'enable-dp-attention': False, 'api-key': None}, ['--trust-remote-code']),
    ({'cuda-graph-bs': [1, 2, 4]}, ['--cuda-graph-bs', '1', '2', '4']),
    ({'cuda-graph-bs': []}, []),
    ({'mem-fraction-static': 0.85}, ['--mem-fraction-static', '0.85']),
    ({'json-model-override-args': {'rope_scaling': {'type': 'yarn', 'factor': 4}}},
     ['--json-model-override-args', '{"rope_scaling":{"factor":4,"type":"yarn"}}']),
    (None, []),
])
def test_cli_args(args, argv):
    assert sglang_cli_args(args) == argv


def test_cli_args_keeps_order():
    assert sglang_cli_args({'port': 1, 'host': 'h'}) == ['--port', '1', '--host', 'h']


@pytest.mark.parametrize('bad', [['--tp-size', '8'], 'tp-size=8'])
def test_cli_args_rejects_non_dict(bad):
    with pytest.raises(AnsibleFilterError, match='expected a dict'):
        sglang_cli_args(bad)


@pytest.mark.parametrize('name', ['tp size', 'tp-size=8', '', 3])
def test_cli_args_rejects_bad_flag(name):
    with pytest.raises(AnsibleFilterError):
        sglang_cli_args({name: 1})


def _systemd_split(line):
    # systemd's ExecStart= splitting of our output: POSIX double quotes with backslash escapes,
    # then %% and $$ collapse to single characters.
    return [w.replace('%%', '%').replace('$$', '$') for w in shlex.split(line)]


@pytest.mark.parametrize('argv', [
    ['/opt/sglang/venv/bin/python', '-m', 'sglang.launch_server', '--port', '30000'],
    ['--served-model-name', 'GLM 5 "fp8"'],
    ['--json-model-override-args', '{"a": "b c"}'],
    ['--chat-template', 'C:\\templates\\x.jinja'],
    ['--tool-call-parser', '100%', '--x', '$HOME'],
])
def test_systemd_exec_args_round_trip(argv):
    assert _systemd_split(systemd_exec_args(argv)) == argv


def test_systemd_exec_args_leaves_plain_words_unquoted():
    assert systemd_exec_args(['/usr/bin/python3', '-m', 'sglang.launch_server']) == '/usr/bin/python3 -m sglang.launch_server'


def test_systemd_exec_args_rejects_string():
    with pytest.raises(AnsibleFilterError, match='expected a list'):
        systemd_exec_args('--port 1')


# known_flags / boolean_flags: the lists come from llmops.sglang.sglang_server_flags; here a few real SGLang 0.5.9 flags.
_KNOWN_059 = ['--model-path', '--model', '--tp-size', '--tensor-parallel-size', '--trust-remote-code',
              '--enable-flashinfer-allreduce-fusion', '--cuda-graph-bs', '--mem-fraction-static']
_SWITCHES_059 = ['--trust-remote-code', '--enable-flashinfer-allreduce-fusion']


def test_cli_args_known_flags_accepts_defined_flags_and_aliases():
    args = {'model_path': 'm', 'tensor-parallel-size': 2, '--trust-remote-code': True, 'cuda-graph-bs': [1, 2]}
    assert sglang_cli_args(args, known_flags=_KNOWN_059, boolean_flags=_SWITCHES_059) == sglang_cli_args(args)


def test_cli_args_known_flags_rejects_unknown_with_close_match():
    args = {'model-path': 'm', 'enforce-disable-flashinfer-allreduce-fusion': True}
    with pytest.raises(AnsibleFilterError) as err:
        sglang_cli_args(args, known_flags=_KNOWN_059)
    # What the filter decides on (the rule it shares with sglang_server_flags): one unknown flag, its close match.
    unknown, problems = check_args(args, {'flags': ['--' + flag.lstrip('-') for flag in _KNOWN_059], 'boolean_flags': None})
    assert unknown == [{'key': 'enforce-disable-flashinfer-allreduce-fusion', 'flag': '--enforce-disable-flashinfer-allreduce-fusion',
                        'did_you_mean': ['--enable-flashinfer-allreduce-fusion']}]
    assert problems == []
    # The golden message of the unknown-flag status.
    assert str(err.value) == ('sglang_cli_args: the installed SGLang does not define this flag: --enforce-disable-flashinfer-allreduce-fusion '
                              '(did you mean --enable-flashinfer-allreduce-fusion?). Fix the name, or drop the flag for this release '
                              '(known_flags lists %d flags)' % len(_KNOWN_059))


def test_cli_args_known_flags_names_every_unknown_flag():
    args = {'tp': 2, 'mem_fraction': 0.8, 'zzzz': 1}
    with pytest.raises(AnsibleFilterError):
        sglang_cli_args(args, known_flags=_KNOWN_059)
    unknown, dummy = check_args(args, {'flags': ['--' + flag.lstrip('-') for flag in _KNOWN_059], 'boolean_flags': None})
    assert [item['flag'] for item in unknown] == ['--tp', '--mem-fraction', '--zzzz']
    assert '--mem-fraction-static' in unknown[1]['did_you_mean']
    assert unknown[2]['did_you_mean'] == []


def test_cli_args_unknown_flag_even_when_false():
    # a flag the release does not have is an error even when it would be left out: the dict is wrong for this release
    with pytest.raises(AnsibleFilterError, match='--enable-foo'):
        sglang_cli_args({'enable-foo': False}, known_flags=_KNOWN_059)


def test_cli_args_known_flags_without_dashes():
    assert sglang_cli_args({'tp-size': 2}, known_flags=['tp-size']) == ['--tp-size', '2']


@pytest.mark.parametrize('value', ['yes', 'true', 1, 0, ['a']])
def test_cli_args_boolean_flags_reject_non_bool(value):
    with pytest.raises(AnsibleFilterError, match=r'--trust-remote-code takes no value \(it is a switch\)'):
        sglang_cli_args({'trust_remote_code': value}, known_flags=_KNOWN_059, boolean_flags=_SWITCHES_059)


@pytest.mark.parametrize('value, argv', [(True, ['--trust-remote-code']), (False, []), (None, [])])
def test_cli_args_boolean_flags_accept_bool_and_null(value, argv):
    assert sglang_cli_args({'trust-remote-code': value}, boolean_flags=_SWITCHES_059) == argv


def test_cli_args_value_flag_is_not_checked_as_switch():
    assert sglang_cli_args({'tp-size': 'not-a-number'}, boolean_flags=_SWITCHES_059) == ['--tp-size', 'not-a-number']


@pytest.mark.parametrize('bad', ['--tp-size', {'--tp-size': 1}, 3])
def test_cli_args_known_flags_must_be_a_list(bad):
    with pytest.raises(AnsibleFilterError, match='known_flags must be a list'):
        sglang_cli_args({'tp-size': 1}, known_flags=bad)


# Two keys that name the same flag: today's dicts would render the flag twice and SGLang's argparse keeps the last.
@pytest.mark.parametrize('args, keys, flag', [
    ({'tp_size': 4, 'tp-size': 8}, ("'tp_size'", "'tp-size'"), '--tp-size'),
    ({'--tp-size': 4, 'tp-size': 8}, ("'--tp-size'", "'tp-size'"), '--tp-size'),
    ({'--model_path': 'a', 'model-path': 'b'}, ("'--model_path'", "'model-path'"), '--model-path'),
])
def test_cli_args_rejects_two_keys_for_one_flag(args, keys, flag):
    with pytest.raises(AnsibleFilterError) as err:
        sglang_cli_args(args)
    assert str(err.value) == (
        f"sglang_cli_args: {keys[0]} and {keys[1]} both name {flag} (keys are read without the leading -- and with _ as -), "
        f"so {flag} would be given 2 times and SGLang would silently use the last; keep one of them"
    )


def test_cli_args_duplicate_keys_whatever_their_values():
    # null/false leave a flag out, but the dict still says two things about one flag: which one was meant is unknown
    with pytest.raises(AnsibleFilterError, match="'trust_remote_code' and '--trust-remote-code' both name --trust-remote-code"):
        sglang_cli_args({'trust_remote_code': True, '--trust-remote-code': None})


def test_cli_args_three_keys_and_two_flags_in_one_message():
    args = {'tp_size': 1, 'port': 1, 'tp-size': 2, '--tp_size': 3, '--port': 2}
    with pytest.raises(AnsibleFilterError) as err:
        sglang_cli_args(args)
    assert duplicate_keys(args) == [('--tp-size', ['tp_size', 'tp-size', '--tp_size']), ('--port', ['port', '--port'])]
    # Both in one message, in the order the flags first appear (the two-key wording is the golden one above).
    assert str(err.value) == 'sglang_cli_args: ' + '; '.join(duplicate_message(flag, keys) for flag, keys in duplicate_keys(args))


def test_cli_args_duplicates_checked_before_known_flags():
    with pytest.raises(AnsibleFilterError, match="'tp_size' and 'tp-size' both name --tp-size"):
        sglang_cli_args({'tp_size': 4, 'tp-size': 8}, known_flags=_KNOWN_059, boolean_flags=_SWITCHES_059)


def test_cli_args_aliases_are_not_duplicates():
    # --tensor-parallel-size is argparse's alias of --tp-size; aliases are not resolved (only identical names count)
    assert sglang_cli_args({'tp-size': 4, 'tensor-parallel-size': 8}, known_flags=_KNOWN_059) == [
        '--tp-size', '4', '--tensor-parallel-size', '8']


def test_cli_args_malformed_name_reported_before_duplicates():
    with pytest.raises(AnsibleFilterError, match="'tp size' is not a valid SGLang flag name"):
        sglang_cli_args({'tp_size': 1, 'tp-size': 2, 'tp size': 3})
