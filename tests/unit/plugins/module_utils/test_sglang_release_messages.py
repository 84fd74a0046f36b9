# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every SGLang release the collection supports, mined for the messages of a failed start (tests/sglang_messages.py),
each checked against the classifier's rules: a new release's new message that no rule reads fails here, naming it.

* A message SGLang logs right before it ends its process tree must be a crash on its own, at once, with that line as
  the first error line (a decisive phrase of _sglang_rules), unless it is listed in NOT_A_FAILED_START with why.
* An exception the argument handling raises must be ``arg_error`` at stage ``start``: as the end of the launcher's
  traceback, and as its exception line alone (a one-line failure, the top of the traceback not captured).

The wheels are the unit tests' offline cache (tests/sglang_wheels.py, UNIT_VERSIONS).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import sglang_messages  # noqa: E402  pylint: disable=wrong-import-position
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import LogClassifier  # noqa: E402

# Logged before a process ends, but not the end of a start that failed (template: why).
NOT_A_FAILED_START = {
    "Exit code: {}": "0.4.x logs it right after 'Rank N scheduler is dead', the decisive line",
    "Weight cache daemon (pid={}) did not exit within {}s of SIGTERM; sending SIGKILL.": "shutdown of a stopped server",
    "Scheduler process {} did not terminate, killing...": "shutdown of the gRPC server",
    "Sidecar module did not terminate; killing process tree": "shutdown of a sidecar",
    "[weight_cache] force takeover: killing existing daemon pid={} for GPU {} and reclaiming its socket/ready files.":
        "ends another process (a stale weight-cache daemon), then the start goes on",
    "[weight_cache] force takeover: killing existing daemon pid={} for rank {} and reclaiming its socket/ready files.":
        "ends another process (a stale weight-cache daemon), then the start goes on",
}
PREFIX = "[2026-12-02 03:14:15 TP0] "
LAUNCHER = ('  File "/opt/venv/lib/python3.12/site-packages/sglang/launch_server.py", line 14, in <module>\n'
            "    server_args = prepare_server_args(sys.argv[1:])\n")


def wheel(version):
    return sglang_wheels.wheel_path(version)


@pytest.mark.parametrize("version", sglang_wheels.UNIT_VERSIONS)
def test_every_message_logged_before_sglang_ends_its_processes_is_a_crash(version):
    unread = []
    messages = sglang_messages.exit_messages(wheel(version))
    assert messages, "no message mined from %s: the miner no longer understands this release" % version
    for message in sorted(messages):
        if message.template in NOT_A_FAILED_START:
            continue
        line = PREFIX + sglang_messages.render(message.template).split("\n")[0]
        classifier = LogClassifier()
        classifier.feed(line + "\n", now=0.0)
        res = classifier.result()
        if (res["status"], res["error_line"]) != ("crashed", line):
            unread.append("%s: %r" % (message.path, message.template))
    assert not unread, "SGLang %s logs these before it ends its process tree, and no rule reads them:\n%s" % (
        version, "\n".join(unread))


@pytest.mark.parametrize("version", sglang_wheels.UNIT_VERSIONS)
def test_every_argument_rejection_is_an_arg_error(version):
    raises = sglang_messages.argument_raises(wheel(version))
    assert raises, "no raise mined from %s" % version
    wrong = []
    for item in sorted(raises):
        exception = "%s: %s" % (item.exc, sglang_messages.render(item.template, "x"))
        traceback = ("Traceback (most recent call last):\n" + LAUNCHER
                     + '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/%s", line 812, in __post_init__\n'
                     % item.path + "    raise %s(\n" % item.exc + exception + "\n")
        for text in (traceback, exception + "\n"):
            classifier = LogClassifier()
            classifier.feed(text, now=0.0)
            classifier.flush(now=0.0)
            res = classifier.result()
            if (res["status"], res["stage"], res["signature"]) != ("crashed", "start", "arg_error"):
                wrong.append("%s %s -> %s %s" % (item.path, exception[:120], res["status"], res["signature"]))
    assert not wrong, "SGLang %s rejects its arguments with these, not read as arg_error:\n%s" % (version, "\n".join(wrong))
