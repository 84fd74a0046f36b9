# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""No false success: the host pattern of every play the collection ships goes through llmops.sglang.play_hosts, and
that lookup matches patterns the way ansible-core does and says what to try when nothing matches.

The real ansible-playbook runs of each playbook with a pattern that matches nothing are in
tests/integration/test_playbooks_no_hosts.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader

from ansible_collections.llmops.sglang.plugins.lookup.play_hosts import checked_pattern, matching_hosts, no_match_message, only_reading

PLAYBOOKS = sorted((Path(__file__).resolve().parents[3] / 'playbooks').glob('*.yml'))
GROUPS = {'all': ['a1', 'a2', 'b1'], 'ungrouped': [], 'gpu': ['a1', 'a2'], 'cpu': ['b1'], 'empty': []}


def plays():
    for path in PLAYBOOKS:
        for play in DataLoader().load_from_file(str(path)):
            if 'import_playbook' not in play and 'ansible.builtin.import_playbook' not in play:
                yield path.stem, play


@pytest.mark.parametrize('name, play', list(plays()), ids=lambda v: v if isinstance(v, str) else v.get('name', ''))
def test_every_play_takes_its_hosts_through_the_guard(name, play):
    hosts = play['hosts']
    # the guarded pattern, optionally joined with a group the playbook itself builds (llmops.sglang.roll's workers)
    match = re.fullmatch(r"\{\{ lookup\('llmops\.sglang\.play_hosts', (\w+) \| default\('(\w+)'\), var='(\w+)', "
                         r"playbook='llmops\.sglang\.(\w+)'\) \}\}(:__\w+)?", hosts)
    assert match, hosts
    variable, _default, named, playbook, _added = match.groups()
    assert variable == named and playbook == name


@pytest.mark.parametrize('pattern, hosts', [
    ('gpu', ['a1', 'a2']),
    ('gpu:cpu', ['a1', 'a2', 'b1']),
    ('gpu:!a1', ['a2']),
    ('gpu:&cpu', []),
    ('g*', ['a1', 'a2']),
    ('a*', ['a1', 'a2', 'b1']),  # group "all" matches too
    ('~b[0-9]', ['b1']),
    ('sglang', []),
    ('empty', []),
    ('gpu[1]', ['a2']),
])
def test_patterns_match_as_ansible_core_matches_them(pattern, hosts):
    assert matching_hosts(pattern, GROUPS) == hosts


def lookup(pattern, play_hosts_all=None, **options):
    variables = {'groups': GROUPS}
    if play_hosts_all is not None:
        variables['ansible_play_hosts_all'] = play_hosts_all
    return checked_pattern([pattern], variables, **options)


def test_a_matching_pattern_is_returned_unchanged():
    assert lookup('gpu:!a1') == 'gpu:!a1'
    assert lookup('gpu', play_hosts_all=['a2']) == 'gpu'  # --limit a2


def test_a_pattern_that_matches_nothing_fails_naming_it_and_the_groups():
    with pytest.raises(AnsibleLookupError) as err:
        lookup('sglang', play_hosts_all=['a1', 'a2', 'b1'], var='sglang_deploy_hosts', playbook='llmops.sglang.deploy')
    assert str(err.value) == (
        "llmops.sglang.deploy: the host pattern 'sglang' (sglang_deploy_hosts) matches no host: the inventory has 3 hosts "
        "(a1, a2, b1), in the groups cpu, gpu. Nothing was run; put the hosts in a group of that name, or set -e "
        "sglang_deploy_hosts=<pattern>.")


def test_a_limit_that_leaves_none_of_the_pattern_fails_naming_both():
    with pytest.raises(AnsibleLookupError) as err:
        lookup('gpu', play_hosts_all=['b1'], var='sglang_tune_hosts')
    assert 'it selects 2 hosts (a1, a2), and --limit leaves none of them (it leaves 1 host (b1))' in str(err.value)
    assert str(err.value).endswith('Nothing was run; widen --limit, or leave it out.')


def test_an_empty_inventory_says_so():
    message = no_match_message('sglang', {'all': [], 'ungrouped': []}, [], None)
    assert message.startswith("the host pattern 'sglang' matches no host: the inventory has no hosts")


def test_many_hosts_are_counted_not_listed():
    hosts = ['h%d' % i for i in range(40)]
    message = no_match_message('sglang', {'all': hosts, 'ungrouped': hosts}, [], None)
    assert 'the inventory has 40 hosts (h0, h1, h2, h3, h4, ...), in no group' in message


@pytest.mark.parametrize('terms', [[], ['a', 'b'], [''], [3]])
def test_the_lookup_takes_exactly_one_pattern(terms):
    with pytest.raises(AnsibleLookupError, match='takes one host pattern'):
        checked_pattern(terms, {'groups': GROUPS})


@pytest.mark.parametrize('cliargs, reading', [
    ({'syntax': True}, True), ({'listtasks': True}, True), ({'listtags': True}, True),
    ({'syntax': False, 'listhosts': True}, False), ({}, False),
])
def test_a_syntax_check_or_a_task_list_runs_nothing_and_is_not_checked(cliargs, reading):
    # ansible-lint's syntax check runs without an inventory; --list-hosts shows hosts, so it is checked
    assert only_reading(cliargs) is reading
