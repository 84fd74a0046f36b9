# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What README.md and docs/ say, held against the checkout: the two set-up commands, the install commands and the
version they name, galaxy.yml's URLs, every `ansible-doc` command, and the source lines docs quote from SGLang 0.5.9.

README's example outputs are held against what the demo prints by tests/integration/test_demo.py (it runs the demo);
README's install commands run for real in tests/integration/test_readme_install.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / 'README.md').read_text(encoding='utf-8')
GALAXY = yaml.safe_load((ROOT / 'galaxy.yml').read_text(encoding='utf-8'))
sys.path.insert(0, str(ROOT / 'tests'))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position


def section(title):
    start = README.index('\n## %s\n' % title)
    end = README.find('\n## ', start + 1)
    return README[start:end if end > 0 else None]


def code_blocks(text, lang):
    return re.findall(r'^```%s\n(.*?)^```' % lang, text, re.M | re.S)


def commands(block):
    return [line.split('#')[0].strip() for line in block.splitlines() if line.split('#')[0].strip()]


def test_try_it_has_the_two_set_up_commands_and_the_demo_modes_beside_them():
    blocks = code_blocks(section('Try it (two commands)'), 'bash')
    assert commands(blocks[0]) == ['bash demo/run.sh', 'bash tests/run-all.sh']
    assert commands(blocks[1]) == ['bash demo/run.sh crash', 'bash demo/run.sh tune', 'bash demo/run.sh fleet',
                                   'bash demo/run.sh guard']
    # the demo's own usage names the same modes
    usage = re.search(r'usage: \$0 \[([a-z|]+)\]', (ROOT / 'demo' / 'run.sh').read_text()).group(1)
    assert usage.split('|') == ['ready', 'crash', 'tune', 'fleet', 'guard']


@pytest.mark.parametrize('rc, said', [(2, True), (99, False), (4, False), (0, False)])
def test_the_crash_demo_calls_only_failed_hosts_expected(rc, said):
    # seen: Ctrl-C in the crash demo's deploy (ansible-playbook exit code 99) printed "(expected: the crash demo's hosts
    # fail ...)"; the demo's own line runs here under its own shell options
    line = [ln for ln in (ROOT / 'demo' / 'run.sh').read_text().splitlines() if "(expected: the crash demo's" in ln]
    assert len(line) == 1
    run = subprocess.run(['bash', '-c', 'set -euo pipefail; rc=%d\n%s\necho next' % (rc, line[0])],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0 and run.stdout.endswith('next\n'), run
    assert ("(expected: the crash demo's hosts fail" in run.stdout) is said, run.stdout


def test_install_commands_name_the_checkout_and_the_version_galaxy_yml_builds():
    installs = [c for b in code_blocks(section('Use it on your GPU hosts'), 'bash') for c in commands(b)
                if c.startswith('ansible-galaxy')]
    assert installs == [
        'ansible-galaxy collection install .',
        'ansible-galaxy collection build --output-path /tmp .',
        'ansible-galaxy collection install /tmp/%s-%s-%s.tar.gz' % (GALAXY['namespace'], GALAXY['name'], GALAXY['version']),
    ]
    assert 'writes /tmp/%s-%s-%s.tar.gz' % (GALAXY['namespace'], GALAXY['name'], GALAXY['version']) in README


def test_no_url_that_cannot_be_reached():
    # no repository of this name was ever published: README and galaxy.yml name none
    assert 'github.com/llmops' not in README
    assert not {'repository', 'documentation', 'homepage', 'issues'} & set(GALAXY)


PLUGIN_FILES = {
    'module': 'plugins/modules/{}.py',
    'callback': 'plugins/callback/{}.py',
    'lookup': 'plugins/lookup/{}.py',
    'role': 'roles/{}/meta/argument_specs.yml',
}


def ansible_doc_commands():
    for line in README.splitlines():
        for match in re.finditer(r'ansible-doc(?: -t (\w+))? llmops\.sglang\.(\w+)', line):
            yield match.group(1) or 'module', match.group(2)


@pytest.mark.parametrize('kind, name', sorted(set(ansible_doc_commands())))
def test_every_ansible_doc_command_names_a_documented_plugin_of_its_type(kind, name):
    if kind == 'filter':
        assert (ROOT / 'plugins' / 'filter' / ('%s.yml' % name)).is_file(), name
    else:
        assert (ROOT / PLUGIN_FILES[kind].format(name)).is_file(), (kind, name)


def test_the_roles_need_t_role_and_readme_says_so():
    kinds = dict((name, kind) for kind, name in ansible_doc_commands())
    assert kinds.get('sglang_service') == 'role'


def test_docs_quote_sglang_0_5_9_source_lines_as_the_messages_give_them():
    quoted = {}
    for page in sorted((ROOT / 'docs').glob('*.md')):
        for flag, where in re.findall(r"(--[a-z-]+) (?:expects|must be)[^\n`]*?\((sglang/srt/server_args\.py:\d+)\)",
                                      page.read_text(encoding='utf-8')):
            quoted.setdefault(flag, set()).add(where)
    assert {'--tp-size', '--load-format'} <= set(quoted), quoted
    values = sglang_wheels.server_flags('0.5.9')['values']
    for flag, places in quoted.items():
        assert places == {values[flag]['source']}, (flag, places)


def test_readmes_ansible_cfg_is_what_the_demo_and_the_deploy_benchmarks_run_with():
    """README's internal_poll_interval is the one demo/run.sh writes and the deploy benchmarks measure by default (their
    figures are README's configuration's); tests/run-all.sh keeps its own and says why."""
    (readme,) = [float(v) for block in code_blocks(README, 'ini')
                 for v in re.findall(r'^internal_poll_interval = ([0-9.]+)$', block, re.M)]
    demo = re.findall(r'internal_poll_interval = ([0-9.]+)', (ROOT / 'demo' / 'run.sh').read_text(encoding='utf-8'))
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    import fleet_deploy  # noqa: E402  pylint: disable=import-outside-toplevel,import-error
    import no_change_deploy  # noqa: E402  pylint: disable=import-outside-toplevel,import-error
    defaults = [fleet_deploy.README_POLL_INTERVAL, no_change_deploy.parse_args([]).internal_poll_interval]
    assert [float(v) for v in demo] + defaults == [readme] * 3
