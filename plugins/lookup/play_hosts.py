# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmops.sglang.play_hosts: a play's host pattern, or an error when it matches no host (so no run does nothing and
exits 0)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: play_hosts
version_added: 0.2.0
short_description: A play's host pattern, or a clear error when the pattern matches no host
description:
  - Returns the host pattern it is given, unchanged, when the pattern matches at least one host of the inventory that
    C(--limit) leaves; otherwise fails, naming the pattern, the variable that sets it, the inventory's groups and what
    to try.
  - >-
    Meant for a play's C(hosts) keyword. ansible-playbook skips a play whose pattern matches nothing, prints
    C(skipping: no hosts matched) and exits 0; with this lookup such a run fails before anything is touched. Every
    playbook of the collection uses it (C(llmops.sglang.deploy), C(llmops.sglang.check), C(llmops.sglang.tune), ...).
  - C(ansible-playbook --syntax-check), C(--list-tasks) and C(--list-tags) run nothing, so the pattern is returned
    unchecked there (ansible-lint's syntax check runs without an inventory).
  - Patterns are evaluated by ansible-core's own inventory code (groups, C(:), C(:&), C(:!), wildcards, regular
    expressions), on the C(groups) of the run; C(--limit) is applied through the hosts ansible-core offers the play.
options:
  _terms:
    description: The host pattern (one).
    type: str
    required: true
  var:
    description: The variable that sets the pattern, named in the error (for example V(sglang_deploy_hosts)).
    type: str
  playbook:
    description: The playbook, named in the error (for example V(llmops.sglang.deploy)).
    type: str
author:
  - llmops.sglang contributors (@llmops)
"""

EXAMPLES = r"""
- name: Deploy SGLang
  hosts: "{{ lookup('llmops.sglang.play_hosts', sglang_deploy_hosts | default('sglang'), var='sglang_deploy_hosts') }}"
  tasks: []
"""

RETURN = r"""
_raw:
  description: The pattern, unchanged (one element).
  type: list
  elements: str
"""

from ansible import context
from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.inventory.manager import InventoryManager
from ansible.plugins.lookup import LookupBase


def matching_hosts(pattern, groups):
    """The hosts of `groups` (name -> host names) that `pattern` selects, by ansible-core's own pattern rules."""
    manager = InventoryManager(None, parse=False)
    for group, hosts in groups.items():
        manager.add_group(group)
        for host in hosts:
            manager.add_host(host, group=group)
    try:
        return [host.name for host in manager.get_hosts(pattern=pattern)]
    except AnsibleError:  # HOST_PATTERN_MISMATCH=error: ansible-core's own no-match error; the caller says more
        return []


def no_match_message(pattern, groups, matched, limited, var=None, playbook=None):
    """What failed, why, and what to try: `matched` are the hosts the pattern selects before --limit, `limited` the
    hosts --limit leaves (None without --limit)."""
    who = '%s: ' % playbook if playbook else ''
    named = ' (%s)' % var if var else ''
    everyone = groups.get('all') or []
    if matched:
        why = 'it selects %s, and --limit leaves none of them (it leaves %s)' % (_few(matched), _few(limited or []))
        advice = 'widen --limit, or leave it out'
    else:
        if not everyone:
            why = 'the inventory has no hosts (was -i given, and does it parse?)'
        else:
            names = sorted(g for g, hosts in groups.items() if g not in ('all', 'ungrouped') and hosts)
            why = 'the inventory has %s, %s' % (_few(everyone), 'in the groups %s' % ', '.join(names) if names else 'in no group')
        advice = 'put the hosts in a group of that name'
        advice += ', or set -e %s=<pattern>' % var if var else ', or change the pattern'
    return '%sthe host pattern %r%s matches no host: %s. Nothing was run; %s.' % (who, pattern, named, why, advice)


def _few(hosts, shown=5):
    """'3 hosts (a, b, c)', at most `shown` names."""
    names = ', '.join(list(hosts)[:shown]) + (', ...' if len(hosts) > shown else '')
    return '%d host%s (%s)' % (len(hosts), '' if len(hosts) == 1 else 's', names)


def one_pattern(terms):
    if len(terms) != 1 or not isinstance(terms[0], str) or not terms[0].strip():
        raise AnsibleLookupError('llmops.sglang.play_hosts takes one host pattern (a non-empty string), got %r' % (terms,))
    return terms[0]


def checked_pattern(terms, variables, var=None, playbook=None):
    """The one pattern of `terms` when it selects a host of the run's inventory (variables: groups, and
    ansible_play_hosts_all, which holds every host --limit leaves while a play's hosts are templated); else an error."""
    pattern = one_pattern(terms)
    groups = dict((variables or {}).get('groups') or {})
    matched = matching_hosts(pattern, groups)
    limited = (variables or {}).get('ansible_play_hosts_all')
    limited = list(limited) if limited is not None else None
    hosts = matched
    if limited is not None:
        # the implicit localhost is in no group and never in ansible_play_hosts_all
        known = set(groups.get('all') or ())
        hosts = [h for h in matched if h in limited or h not in known]
    if not hosts:
        raise AnsibleLookupError(no_match_message(pattern, groups, matched, limited, var, playbook))
    return pattern


def only_reading(cliargs):
    """ansible-playbook --syntax-check, --list-tasks and --list-tags read the playbook and run nothing on any host."""
    return any(cliargs.get(key) for key in ('syntax', 'listtasks', 'listtags'))


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if only_reading(context.CLIARGS):
            return [one_pattern(terms)]
        return [checked_pattern(terms, variables, self.get_option('var'), self.get_option('playbook'))]
