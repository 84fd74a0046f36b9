# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Recognise, patch and revert the SM120 (consumer Blackwell) sites of an installed SGLang.

Private module_utils for ``llmops.sglang.sglang_patch_sm120``.  Runs on the target host:
Python 3.9+, standard library only.

Every site is a list of known *shapes* (one per SGLang release range, see the collection's
docs/sglang_patch_sm120.md).  A shape is a set of line edits, each anchored on its context
(a function, an ``if (`` statement, an import block, a neighbouring line).  An edit is either
"replace this whole line by that one" or "insert this line right after that one"; the inverse of
each edit is kept exactly, so reverting restores the released bytes.  The state of a site is read
from the file content only (idempotency keyed on content).  All sites of a run are planned in
memory first; nothing is written unless every requested site is in a known state.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import NoSpaceError, write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils.host._hangup import shielded
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._install import (
    dist_version,
    locate,
    resolve_python,
    version_key,
)

SITE_GATE = 'allreduce_fusion_gate'
SITE_AUTO = 'allreduce_fusion_auto_enable'
SITE_GLM5 = 'glm5_moe_runner_backend'
SITE_RESOLVER = 'allreduce_fusion_backend_resolver'
SITE_NAMES = (SITE_GATE, SITE_AUTO, SITE_GLM5, SITE_RESOLVER)

APPLIED = 'applied'
ALREADY_APPLIED = 'already_applied'
REVERTED = 'reverted'
NOT_PRESENT = 'not_present'
UPSTREAM_SUPPORTS = 'upstream_supports_sm120'
UNSUPPORTED = 'unsupported'

# Newest release whose shapes are known.  A site that cannot be found in a newer release is an
# unknown shape (fail), never silently "not present".
NEWEST_KNOWN = '0.5.23'

GLM5_ARCH = 'GlmMoeDsaForCausalLM'

F_COMMUNICATOR = 'srt/layers/communicator.py'
F_ADD_NORM = 'srt/layers/layer_boundary/residual/add_norm.py'
F_SERVER_ARGS = 'srt/server_args.py'
F_OVERRIDES = 'srt/arg_groups/overrides.py'
F_COMM_FUSION = 'srt/layers/flashinfer_comm_fusion.py'
# Every file a site may edit, relative to the sglang package directory.
PATCH_FILES = (F_COMMUNICATOR, F_ADD_NORM, F_SERVER_ARGS, F_OVERRIDES, F_COMM_FUSION)

# Byte-compile source read from stdin with the target's interpreter; the live file is never touched.
COMPILE_SNIPPET = 'import sys; compile(sys.stdin.buffer.read(), sys.argv[1], "exec", dont_inherit=True)'


class PatchError(Exception):
    """A run cannot be planned or written.  ``context`` goes into fail_json."""

    def __init__(self, msg, **context):
        super().__init__(msg)
        self.msg = msg
        self.context = context


class ShapeMismatch(Exception):
    """A shape does not match the file.  ``expected``/``found`` describe the difference."""

    def __init__(self, msg, expected=None, found=None, line=None):
        super().__init__(msg)
        self.msg = msg
        self.expected = expected
        self.found = found
        self.line = line


# ---------------------------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------------------------

def _in_range(version, low=None, high=None):
    """True if the release lies within [low, high] (both inclusive, prefix releases: 0.5.3 covers 0.5.3.postN)."""
    key = version_key(version)
    if key is None:
        return False
    if low is not None and key < version_key(low):
        return False
    if high is not None:
        hk = version_key(high)
        # "0.5.3" as an upper bound includes its post releases
        if key[:3] > hk[:3]:
            return False
    return True


def _newer_than_known(version):
    key = version_key(version)
    return key is None or key[:3] > version_key(NEWEST_KNOWN)[:3]


@dataclasses.dataclass(frozen=True)
class Advice:
    """A warning for a run that enabled SM120 paths: ``kind`` names it for code and tests, ``text`` is for a person."""

    kind: str
    text: str


FUSION_REGRESSION = 'fusion_regression'
FLASHINFER_TOO_OLD = 'flashinfer_too_old'
FLASHINFER_MISSING = 'flashinfer_missing'
MOE_RULE_PREEMPTED = 'moe_rule_preempted'


def advice(result):
    """Warnings for a run that enabled SM120 paths: the measured regression, FlashInfer's SM120 support, upstream's MoE rule."""
    out = []
    applied = {s['name'] for s in result.get('sites', []) if s['status'] == APPLIED}
    if applied & {SITE_GATE, SITE_AUTO, SITE_RESOLVER}:
        out.append(Advice(FUSION_REGRESSION,
                          'SM120 FlashInfer allreduce fusion is enabled in SGLang %s: upstream measured a large throughput regression '
                          'with fusion on PCIe SM120 (TP4 about 1867 -> 236 tokens/s, sgl-project/sglang PR 32330). Benchmark it; '
                          'revert with state=absent (sglang_service_sm120_patch: absent).' % result.get('sglang_version')))
        fi = result.get('_flashinfer_version')
        fk = version_key(fi) if fi else None
        if fk is not None and fk[:3] < (0, 6, 17):
            out.append(Advice(FLASHINFER_TOO_OLD,
                              'flashinfer-python %s is installed beside SGLang; FlashInfer before 0.6.17 cannot build the allreduce-fusion '
                              'kernels for SM120 ("No supported CUDA architectures found for major versions [9, 10]."). Install '
                              'flashinfer-python>=0.6.17 or revert with state=absent.' % fi))
        elif fi is None:
            out.append(Advice(FLASHINFER_MISSING,
                              'flashinfer-python was not found beside SGLang; FlashInfer before 0.6.17 cannot build the allreduce-fusion '
                              'kernels for SM120. Install flashinfer-python>=0.6.17 beside SGLang before the server uses the '
                              'fusion, or revert with state=absent (sglang_service_sm120_patch: absent).'))
    key = version_key(result.get('sglang_version'))
    if SITE_GLM5 in applied and key is not None and key[:3] >= (0, 5, 13):
        out.append(Advice(MOE_RULE_PREEMPTED,
                          'glm5_moe_runner_backend pre-empts the rule of SGLang 0.5.13+ that routes SM120 NVFP4 MoE to '
                          'flashinfer_cutlass on purpose (trtllm-gen MoE kernels are SM100-only, PR 18758).'))
    return out


# ---------------------------------------------------------------------------------------------
# Text model: lines with their endings, regions and anchored edits
# ---------------------------------------------------------------------------------------------

def _body(line):
    """Line content without its line ending."""
    return line.rstrip('\r\n')


def _eol(line):
    return line[len(_body(line)):]


def _indent(line):
    body = _body(line)
    return body[:len(body) - len(body.lstrip())]


def _text(line):
    """Stripped content.  Trailing whitespace makes a line unrecognisable on purpose (exact revert)."""
    body = _body(line)
    if body != body.rstrip():
        return None
    return body.strip()


def _excerpt(lines, start, end, limit=12):
    end = min(end, start + limit)
    return ''.join(lines[max(start, 0):end])


class Region:
    """Where an edit may look: a half-open range of line indexes, found by ``find(lines)``."""

    label = 'file'

    def find(self, lines):
        return 0, len(lines)


class WholeFile(Region):
    label = 'the module'


class Function(Region):
    """The body of a uniquely named ``def`` (any of ``names``), up to the next line at or left of its indent."""

    def __init__(self, *names):
        self.names = names
        self.label = 'def %s' % ' / '.join(names)
        self._re = re.compile(r'^(\s*)def (%s)\(' % '|'.join(re.escape(n) for n in names))

    def find(self, lines):
        hits = [i for i, line in enumerate(lines) if self._re.match(line)]
        if len(hits) != 1:
            raise ShapeMismatch('expected exactly one %s, found %d' % (self.label, len(hits)),
                                expected=self.label, found='%d definitions' % len(hits))
        start = hits[0]
        indent = len(_indent(lines[start]))
        # skip the (possibly multi-line) signature
        depth = 0
        i = start
        while i < len(lines):
            body = _body(lines[i])
            depth += body.count('(') - body.count(')')
            i += 1
            if depth <= 0 and body.rstrip().endswith(':'):
                break
        while i < len(lines):
            body = _body(lines[i])
            if body.strip() and len(_indent(lines[i])) <= indent and not body.strip().startswith('#'):
                break
            i += 1
        return start, i


class ImportBlock(Region):
    """A parenthesised ``from MODULE import (`` block at module level."""

    def __init__(self, module):
        self.module = module
        self.label = 'from %s import (...)' % module
        self._head = 'from %s import (' % module

    def find(self, lines):
        hits = [i for i, line in enumerate(lines) if _body(line) == self._head]
        if len(hits) != 1:
            raise ShapeMismatch('expected exactly one "%s" block, found %d' % (self._head, len(hits)),
                                expected=self._head, found='%d blocks' % len(hits))
        start = hits[0]
        for i in range(start + 1, len(lines)):
            if _body(lines[i]) == ')':
                return start, i + 1
        raise ShapeMismatch('the "%s" block is not closed' % self._head, expected=')', found=None)


class IfStatement(Region):
    """The condition lines of the unique multi-line ``if (`` ... ``):`` statement inside ``within``.

    The statement is chosen by a condition line matching ``cond_re`` (the model allow-list test,
    e.g. ``and model_arch in [``) and a body line equal to one of ``body_lines`` (the fusion flag it sets).
    """

    def __init__(self, within, cond_re, body_lines):
        self.within = within
        self.cond_re = re.compile(cond_re)
        self.body_lines = tuple(body_lines)
        self.label = 'the "if (... model_arch in ... )" statement of %s that sets %s' % (within.label, body_lines[0])

    def find(self, lines):
        lo, hi = self.within.find(lines)
        found = []
        i = lo
        while i < hi:
            if _text(lines[i]) == 'if (':
                indent = _indent(lines[i])
                j = i + 1
                while j < hi and _body(lines[j]) != indent + '):':
                    j += 1
                if j >= hi:
                    i += 1
                    continue
                cond = [_text(x) or '' for x in lines[i + 1:j]]
                k = j + 1
                while k < hi and (not _body(lines[k]).strip() or len(_indent(lines[k])) > len(indent)):
                    k += 1
                body = [_text(x) for x in lines[j + 1:k]]
                if any(self.cond_re.match(c) for c in cond) and any(b in self.body_lines for b in body):
                    found.append((i, j))
                i = j + 1
                continue
            i += 1
        if len(found) != 1:
            raise ShapeMismatch('expected exactly one %s, found %d' % (self.label, len(found)),
                                expected=self.label, found='%d such statements' % len(found))
        return found[0][0], found[0][1] + 1


class Edit:
    """Base class.  ``state(lines)`` -> (state, index); ``apply``/``revert`` return new line lists."""

    def describe(self):
        raise NotImplementedError


class Replace(Edit):
    """Replace the one line whose stripped text is ``old`` by ``new`` (indent and line ending kept).

    ``alternates`` are other patched forms (the GLM-5-only / all-models variants) recognised as
    patched.  ``next_text`` requires the following line to be exactly that (context anchor).
    ``first`` takes the first line in the region in any known form instead of requiring one.
    """

    def __init__(self, region, old, new, alternates=(), next_text=None, first=False):
        self.region = region
        self.old = old
        self.new = new
        self.alternates = tuple(a for a in alternates if a != new)
        self.next_text = next_text
        self.first = first

    def describe(self):
        ctx = ' followed by "%s"' % self.next_text if self.next_text else ''
        return '"%s"%s in %s' % (self.old, ctx, self.region.label)

    def _forms(self):
        return (self.old, self.new) + self.alternates

    def locate(self, lines):
        lo, hi = self.region.find(lines)
        forms = self._forms()
        hits = []
        for i in range(lo, hi):
            if _text(lines[i]) in forms:
                if self.next_text is not None and (i + 1 >= len(lines) or _text(lines[i + 1]) != self.next_text):
                    continue
                hits.append(i)
        if not hits or (len(hits) > 1 and not self.first):
            line = lo + 1
            if not hits and self.next_text is not None:
                # show what stands where the anchor says the site should be
                anchors = [i for i in range(max(lo, 1), hi) if _text(lines[i]) == self.next_text]
                found = ''.join(lines[i - 1] + lines[i] for i in anchors) or None
                line = anchors[0] if anchors else line
            elif hi - lo <= 40:
                found = _excerpt(lines, lo, hi)
            else:
                found = '%d matching lines in %s' % (len(hits), self.region.label)
            raise ShapeMismatch('expected exactly one line %s, found %d' % (self.describe(), len(hits)),
                                expected=self.old, found=found, line=line)
        return hits[0]

    def state(self, lines):
        i = self.locate(lines)
        text = _text(lines[i])
        if text == self.old:
            return 'unpatched', i
        if text == self.new:
            return 'patched', i
        return 'variant', i

    def _put(self, lines, i, text):
        line = lines[i]
        out = list(lines)
        out[i] = _indent(line) + text + _eol(line)
        return out

    def apply(self, lines):
        return self._put(lines, self.locate(lines), self.new)

    def revert(self, lines):
        return self._put(lines, self.locate(lines), self.old)


class InsertAfter(Edit):
    """Insert ``new`` (with ``indent``, or the anchor's indent) right after the one line ``anchor``."""

    def __init__(self, region, anchor, new, indent=None):
        self.region = region
        self.anchor = anchor
        self.new = new
        self.indent = indent

    def describe(self):
        return '"%s" in %s' % (self.anchor, self.region.label)

    def state(self, lines):
        lo, hi = self.region.find(lines)
        hits = [i for i in range(lo, hi) if _text(lines[i]) == self.anchor]
        if len(hits) != 1:
            raise ShapeMismatch('expected exactly one line %s, found %d' % (self.describe(), len(hits)),
                                expected=self.anchor, found=_excerpt(lines, lo, hi) if hi - lo <= 40 else None,
                                line=lo + 1)
        i = hits[0]
        if i + 1 < len(lines) and _text(lines[i + 1]) == self.new:
            return 'patched', i + 1
        if any(_text(lines[k]) == self.new for k in range(lo, hi)):
            raise ShapeMismatch('"%s" is present in %s but not right after "%s"' % (self.new, self.region.label, self.anchor),
                                expected='%s\n%s' % (self.anchor, self.new), found=_excerpt(lines, i, i + 3), line=i + 1)
        return 'unpatched', i

    def apply(self, lines):
        st, i = self.state(lines)
        if st == 'patched':
            return list(lines)
        anchor = lines[i]
        indent = _indent(anchor) if self.indent is None else self.indent
        eol = _eol(anchor) or '\n'
        out = list(lines)
        if not _eol(anchor):
            out[i] = anchor + '\n'
        out.insert(i + 1, indent + self.new + eol)
        return out

    def revert(self, lines):
        st, i = self.state(lines)
        if st != 'patched':
            return list(lines)
        out = list(lines)
        del out[i]
        return out


class Shape:
    """One known form of a site in one file.

    ``status`` is None for patchable shapes, or UNSUPPORTED / UPSTREAM_SUPPORTS for shapes that are
    recognised but must not be changed (their edits are then probes: the ``old`` text must be found).
    ``requires``: 'helper' (sglang.srt.utils.is_sm120_supported must exist), 'platform'
    (get_platform().is_sm120 must exist) or None.  ``imports``: names the file must already import.
    """

    def __init__(self, name, path, releases, edits, primary=-1, status=None, reason=None, requires=None, imports=()):
        self.name = name
        self.path = path
        self.releases = releases
        self.edits = edits
        self.primary = primary
        self.status = status
        self.reason = reason
        self.requires = requires
        self.imports = imports


# ---------------------------------------------------------------------------------------------
# Site definitions: one Shape per released form (docs/sglang_patch_sm120.md, docs/sm120-patch-matrix.md)
# ---------------------------------------------------------------------------------------------

_UTILS = 'sglang.srt.utils'
_FUSION_FLAG = 'and _is_flashinfer_available'


def _gate_shapes():
    utils_block = ImportBlock(_UTILS)
    whole = WholeFile()
    import_edit = InsertAfter(utils_block, 'is_sm100_supported,', 'is_sm120_supported,')

    def gate(old, new):
        return Replace(whole, old, new, next_text=_FUSION_FLAG)

    c2_gate = gate('(_is_sm100_supported or _is_sm90_supported)', '(_is_sm100_supported or _is_sm90_supported or _is_sm120_supported)')
    c3_gate = gate('(_is_sm90_supported or _is_sm100_supported)', '(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)')
    return [
        Shape('C1', F_COMMUNICATOR, '0.4.9 - 0.5.1', [
            Replace(whole, '_is_sm100_supported = is_cuda() and is_sm100_supported()', '_is_sm100_supported = is_cuda() and is_sm100_supported()'),
            Replace(whole, '_is_sm100_supported', '_is_sm100_supported', next_text=_FUSION_FLAG),
        ], status=UNSUPPORTED,
            reason='SGLang before 0.5.4 has no is_sm120_supported helper (this gate is SM100-only, shape C1); upgrade SGLang to enable SM120'),
        Shape('C2', F_COMMUNICATOR, '0.5.2 - 0.5.5', [
            import_edit,
            InsertAfter(whole, '_is_sm100_supported = is_cuda() and is_sm100_supported()',
                        '_is_sm120_supported = is_cuda() and is_sm120_supported()', indent=''),
            c2_gate,
        ], requires='helper'),
        Shape('C2c', F_COMMUNICATOR, '0.5.6 - 0.5.7', [
            import_edit,
            InsertAfter(whole, '_is_sm100_supported = _is_cuda and is_sm100_supported()',
                        '_is_sm120_supported = _is_cuda and is_sm120_supported()', indent=''),
            c2_gate,
        ], requires='helper'),
        Shape('C3', F_COMMUNICATOR, '0.5.8 - 0.5.18', [
            import_edit,
            InsertAfter(whole, '_is_sm100_supported = _is_cuda and is_sm100_supported()',
                        '_is_sm120_supported = _is_cuda and is_sm120_supported()', indent=''),
            c3_gate,
        ], requires='helper'),
        Shape('C4', F_COMMUNICATOR, '0.5.19 - 0.5.20', [
            InsertAfter(whole, '_is_sm100_supported = _is_cuda and get_platform().is_sm100',
                        '_is_sm120_supported = _is_cuda and get_platform().is_sm120', indent=''),
            c3_gate,
        ], requires='platform'),
        Shape('C5', F_ADD_NORM, '0.5.21 - 0.5.23', [
            InsertAfter(whole, '_is_sm100_supported = _is_cuda and get_platform().is_sm100',
                        '_is_sm120_supported = _is_cuda and get_platform().is_sm120', indent=''),
            c3_gate,
        ], requires='platform'),
    ]


def _auto_shapes():
    sa_fn = Function('_handle_model_specific_adjustments')
    ov_fn = Function('_flashinfer_allreduce_fusion_auto_enable')
    old_h = 'and (is_sm90_supported() or is_sm100_supported())'
    new_h = 'and (is_sm90_supported() or is_sm100_supported() or is_sm120_supported())'
    old_p = 'and (get_platform().is_sm90 or get_platform().is_sm100)'
    new_p = 'and (get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120)'
    enable = 'self.enable_flashinfer_allreduce_fusion = True'
    backend = 'self.flashinfer_allreduce_fusion_backend = "auto"'
    ret = 'return {"flashinfer_allreduce_fusion_backend": "auto"}'
    ret_var = 'return {"flashinfer_allreduce_fusion_backend": backend}'  # 0.5.23: "cutedsl" for MiMo, else "auto"
    allow = r'^and \(?(is_mimo or )?model_arch( in|$)'
    sa_if = IfStatement(sa_fn, allow, (enable, backend))
    ov_if = IfStatement(ov_fn, allow, (ret, ret_var))
    return [
        Shape('A1', F_SERVER_ARGS, '0.5.7', [
            Replace(IfStatement(sa_fn, allow, (enable,)), 'and (is_sm90_supported() or is_blackwell_supported())',
                    'and (is_sm90_supported() or is_blackwell_supported())'),
        ], status=UPSTREAM_SUPPORTS,
            reason='upstream auto-enables FlashInfer allreduce fusion on is_blackwell_supported(), which includes SM120 '
                   '(shape A1, 0.5.7 only; crash-prone on SM120, sgl-project/sglang#15650, removed again in 0.5.8)'),
        Shape('A2', F_SERVER_ARGS, '0.5.8 - 0.5.14', [Replace(sa_if, old_h, new_h)], imports=('is_sm120_supported',)),
        Shape('A3', F_OVERRIDES, '0.5.15 - 0.5.18', [Replace(ov_if, old_h, new_h)], imports=('is_sm120_supported',)),
        Shape('A4', F_OVERRIDES, '0.5.19 - 0.5.23', [Replace(ov_if, old_p, new_p)], requires='platform'),
    ]


def _glm5_shapes(glm5_only):
    arch = '"%s"' % GLM5_ARCH
    h_all = 'if is_sm100_supported() or is_sm120_supported():'
    h_glm = 'if is_sm100_supported() or (is_sm120_supported() and model_arch == %s):' % arch
    p_all = 'if get_platform().is_sm100 or get_platform().is_sm120:'
    p_glm = 'if get_platform().is_sm100 or (get_platform().is_sm120 and model_arch == %s):' % arch
    h_new, h_alt = (h_glm, h_all) if glm5_only else (h_all, h_glm)
    p_new, p_alt = (p_glm, p_all) if glm5_only else (p_all, p_glm)
    comment = '# Set moe backend for DeepSeek'

    class AfterComment(Region):
        label = 'the line after "%s" in def _handle_model_specific_adjustments' % comment

        def find(self, lines):
            lo, hi = Function('_handle_model_specific_adjustments').find(lines)
            hits = [i for i in range(lo, hi) if _text(lines[i]) == comment]
            if len(hits) != 1:
                raise ShapeMismatch('expected exactly one comment line "%s", found %d' % (comment, len(hits)),
                                    expected=comment, found='%d such lines' % len(hits))
            c = hits[0]
            # the enclosing "if model_arch in [ ... ]:" must be the DeepSeek-family branch that lists GLM-5
            indent = len(_indent(lines[c]))
            k = c - 1
            while k >= lo and not (len(_indent(lines[k])) < indent and re.match(r'^\s*(el)?if model_arch in \[$', _body(lines[k]))):
                k -= 1
            end = k + 1
            while lo <= k and end < c and _text(lines[end]) != ']:':
                end += 1
            arch_list = [_text(x) for x in lines[k + 1:end]] if k >= lo else []
            if arch + ',' not in arch_list and arch not in arch_list:
                raise ShapeMismatch('the "%s" branch does not list %s' % (comment, GLM5_ARCH),
                                    expected='if model_arch in [ ... %s ... ]:' % arch, found=_excerpt(lines, max(k, lo), end + 1))
            return c + 1, c + 2

    dsq = Function('_deepseek_moe_quant_resolution')
    return [
        Shape('G1', F_SERVER_ARGS, '0.5.9 - 0.5.14', [Replace(AfterComment(), 'if is_sm100_supported():', h_new, (h_alt,))],
              imports=('is_sm120_supported',)),
        Shape('G2', F_OVERRIDES, '0.5.15 - 0.5.18', [Replace(dsq, 'if is_sm100_supported():', h_new, (h_alt,), first=True)],
              imports=('is_sm120_supported',)),
        Shape('G3', F_OVERRIDES, '0.5.19 - 0.5.23', [Replace(dsq, 'if get_platform().is_sm100:', p_new, (p_alt,), first=True)],
              requires='platform'),
    ]


def _resolver_shapes():
    fn = Function('_resolve_backend')
    return [
        Shape('F1', F_COMM_FUSION, '0.5.14 - 0.5.18', [
            InsertAfter(ImportBlock(_UTILS), 'is_sm100_supported,', 'is_sm120_supported,'),
            Replace(fn, 'if not (is_sm90_supported() or is_sm100_supported()):',
                    'if not (is_sm90_supported() or is_sm100_supported() or is_sm120_supported()):', first=True),
        ], requires='helper'),
        Shape('F2', F_COMM_FUSION, '0.5.19 - 0.5.23', [
            Replace(fn, 'if not (get_platform().is_sm90 or get_platform().is_sm100):',
                    'if not (get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120):', first=True),
        ], requires='platform'),
    ]


# Releases where a site is known to be absent or not enable-able, when none of its shapes is found.
# (site, low, high, status, reason)
_KNOWN_ABSENT = [
    (SITE_GATE, None, '0.4.8', NOT_PRESENT, 'SGLang %s has no FlashInfer allreduce-fusion gate (shape C0, before 0.4.9)'),
    (SITE_AUTO, None, '0.4.10', NOT_PRESENT, 'SGLang %s never auto-enables FlashInfer allreduce fusion'),
    (SITE_AUTO, '0.5.0rc0', '0.5.6', UNSUPPORTED,
     'SGLang %s auto-enables FlashInfer allreduce fusion only in per-model SM100 branches (shape A0), with no shared gate to '
     'extend; pass --enable-flashinfer-allreduce-fusion to the server instead'),
    (SITE_GLM5, None, '0.5.8', NOT_PRESENT, 'SGLang %s does not know GLM-5 (GlmMoeDsaForCausalLM first appears in 0.5.9)'),
    (SITE_RESOLVER, None, '0.5.13', NOT_PRESENT, 'SGLang %s has no FlashInfer allreduce-fusion backend resolver (_resolve_backend is new in 0.5.14)'),
]

# Text whose presence means the site exists in a file, so failing to recognise it is an unknown shape.
_MARKERS = {
    SITE_GATE: ((F_COMMUNICATOR, F_ADD_NORM), re.compile(r'_is_sm100_supported\b.*\n\s*and _is_flashinfer_available')),
    SITE_AUTO: ((F_SERVER_ARGS, F_OVERRIDES), re.compile(r'Auto-enabling FlashInfer AllReduce Fusion|_flashinfer_allreduce_fusion_auto_enable')),
    SITE_GLM5: ((F_SERVER_ARGS, F_OVERRIDES), re.compile(r'"GlmMoeDsaForCausalLM"')),
    SITE_RESOLVER: ((F_COMM_FUSION,), re.compile(r'def _resolve_backend\(')),
}


def site_shapes(site, glm5_only=True):
    if site == SITE_GATE:
        return _gate_shapes()
    if site == SITE_AUTO:
        return _auto_shapes()
    if site == SITE_GLM5:
        return _glm5_shapes(glm5_only)
    if site == SITE_RESOLVER:
        return _resolver_shapes()
    raise ValueError('unknown site %r' % site)


# ---------------------------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------------------------

class Workspace:
    """In-memory view of the package's files: original and planned text."""

    def __init__(self, package_dir):
        self.package_dir = package_dir
        self.original = {}
        self.current = {}

    def path(self, rel):
        return os.path.join(self.package_dir, rel)

    def exists(self, rel):
        return rel in self.current or os.path.isfile(self.path(rel))

    def lines(self, rel):
        if rel not in self.current:
            path = self.path(rel)
            with open(path, 'rb') as handle:
                data = handle.read()
            try:
                text = data.decode('utf-8')
            except UnicodeDecodeError as exc:
                raise PatchError('%s is not valid UTF-8 (%s); it is not a released SGLang file. Reinstall SGLang.' % (path, exc),
                                 file=path)
            self.original[rel] = data
            self.current[rel] = text.splitlines(True)
        return self.current[rel]

    def set_lines(self, rel, lines):
        self.current[rel] = lines

    def text(self, rel):
        return ''.join(self.current[rel])

    def changed_files(self):
        return [rel for rel in sorted(self.current) if self.text(rel).encode('utf-8') != self.original[rel]]


def _helper_available(ws, kind):
    if kind == 'helper':
        pattern = re.compile(r'^(def is_sm120_supported\(|is_sm120_supported\s*=)', re.M)
        for rel in ('srt/utils/common.py', 'srt/utils.py', 'srt/utils/__init__.py'):
            if ws.exists(rel) and pattern.search(ws.text(rel) if rel in ws.current else _read_text(ws.path(rel))):
                return True
        return False
    if kind == 'platform':
        rel = 'srt/runtime_context.py'
        return ws.exists(rel) and '"is_sm120"' in _read_text(ws.path(rel))
    return True


def _read_text(path):
    with open(path, 'rb') as handle:
        return handle.read().decode('utf-8', 'replace')


def _imports_name(text, name):
    return re.search(r'^\s*%s,?\s*$|^\s*from \S+ import .*\b%s\b' % (re.escape(name), re.escape(name)), text, re.M) is not None


def _match_shape(ws, shape):
    """Return (states, index) for ``shape`` in its file or raise ShapeMismatch."""
    lines = ws.lines(shape.path)
    states = []
    primary_index = None
    for n, edit in enumerate(shape.edits):
        try:
            st, i = edit.state(lines)
        except ShapeMismatch as miss:
            miss.score = n  # how far this shape got: the best candidate for the error message
            raise
        states.append(st)
        if n == (shape.primary % len(shape.edits)):
            primary_index = i
    return states, primary_index


def _site_result(site, path, line, status, reason):
    return {'name': site, 'file': path, 'line': line, 'status': status, 'reason': reason}


def plan_site(ws, site, state, version, glm5_only=True):
    """Plan one site into ``ws``.  Returns the site result; raises PatchError on an unknown shape."""
    shapes = site_shapes(site, glm5_only)
    matched = []
    misses = []
    for shape in shapes:
        if not ws.exists(shape.path):
            continue
        try:
            states, primary = _match_shape(ws, shape)
        except ShapeMismatch as miss:
            misses.append((shape, miss))
            continue
        matched.append((shape, states, primary))
    if len(matched) > 1:
        names = ', '.join('%s in %s' % (s.name, ws.path(s.path)) for s, _st, _p in matched)
        raise PatchError('Site %s of SGLang %s matches several known shapes (%s); refusing to guess. Reinstall SGLang.'
                         % (site, version or 'of unknown version', names), site=site, sglang_version=version)
    if not matched:
        return _site_not_found(ws, site, version, misses)
    shape, states, primary = matched[0]
    path = ws.path(shape.path)
    line = primary + 1 if primary is not None else None
    if shape.status is not None:
        return _site_result(site, path, line, shape.status, shape.reason)
    if shape.requires and not _helper_available(ws, shape.requires):
        what = ('sglang.srt.utils.is_sm120_supported' if shape.requires == 'helper' else 'get_platform().is_sm120')
        return _site_result(site, path, line, UNSUPPORTED,
                            'SGLang %s has no %s helper (it exists from 0.5.4); shape %s cannot be extended to SM120 - upgrade SGLang'
                            % (version or '(unknown version)', what, shape.name))
    for name in shape.imports:
        if not _imports_name(ws.text(shape.path), name):
            raise PatchError(
                'Unknown shape of site %s in %s (SGLang %s): shape %s needs %s imported in that file, and it is not. '
                'Expected an import of %s; nothing was changed. Reinstall the released SGLang or restrict the patches option.'
                % (site, path, version, shape.name, name, name),
                site=site, file=path, sglang_version=version, expected='import of %s' % name, found=None)
    distinct = set(states)
    if len(distinct) > 1 and not distinct <= {'patched', 'variant'}:
        raise PatchError(
            'Site %s in %s (SGLang %s) is partially patched (shape %s: %s); it is not a state this module wrote. '
            'Nothing was changed. Reinstall SGLang (pip install --force-reinstall --no-deps sglang==%s) and run again.'
            % (site, path, version, shape.name, ', '.join('%s=%s' % (e.describe(), s) for e, s in zip(shape.edits, states)), version),
            site=site, file=path, sglang_version=version,
            expected='all edits of shape %s unpatched or all patched' % shape.name, found=dict(zip([e.describe() for e in shape.edits], states)))
    lines = ws.lines(shape.path)
    if state == 'present':
        if distinct == {'patched'}:
            status, reason = ALREADY_APPLIED, 'SM120 already enabled (shape %s, SGLang %s)' % (shape.name, shape.releases)
        else:
            for edit in shape.edits:
                lines = edit.apply(lines)
            ws.set_lines(shape.path, lines)
            was = 'switched to the %s variant' % ('GLM-5-only' if glm5_only else 'all-models') if 'variant' in distinct else 'patched'
            status, reason = APPLIED, 'SM120 enabled, %s (shape %s, SGLang %s)' % (was, shape.name, shape.releases)
    else:
        if distinct == {'unpatched'}:
            status, reason = REVERTED, 'already the released text, nothing to revert (shape %s)' % shape.name
        else:
            for edit in reversed(shape.edits):
                lines = edit.revert(lines)
            ws.set_lines(shape.path, lines)
            status, reason = REVERTED, 'restored the released text (shape %s, SGLang %s)' % (shape.name, shape.releases)
    # line of the primary edit in the resulting text
    try:
        _st, idx = shape.edits[shape.primary].state(ws.lines(shape.path))
        line = idx + 1
    except ShapeMismatch:
        pass
    return _site_result(site, path, line, status, reason)


def _shape_covers(shape, version):
    parts = [p.strip() for p in shape.releases.split('-')]
    return _in_range(version, parts[0], parts[-1])


def _site_not_found(ws, site, version, misses):
    files, marker = _MARKERS[site]
    present = [rel for rel in files if ws.exists(rel) and marker.search(_read_text(ws.path(rel)))]
    if not present:
        if version_key(version) is None:
            # no trace of the site in the files, and no release to check the absence against
            return _site_result(site, None, None, NOT_PRESENT,
                                'no trace of this site in %s, and the SGLang version could not be read (%s)'
                                % (', '.join(files), version or 'no version source'))
        if not _newer_than_known(version):
            for name, low, high, status, reason in _KNOWN_ABSENT:
                if name == site and _in_range(version, low, high):
                    return _site_result(site, None, None, status, reason % version)
    # unknown shape: build the most useful message from the nearest miss
    near = None
    best = None
    for shape, miss in misses:
        # the shape that got furthest, and among those the one whose release range holds this version
        rank = (getattr(miss, 'score', 0), _shape_covers(shape, version))
        if best is None or rank > best:
            near, best = (shape, miss), rank
    known = ', '.join('%s (%s, %s)' % (s.name, s.path, s.releases) for s in site_shapes(site))
    if near is not None:
        shape, miss = near
        path = ws.path(shape.path)
        raise PatchError(
            'Unknown shape of site %s in %s (SGLang %s): %s. Expected the text of one of the known shapes [%s]; '
            'nearest is %s: expected %r, found %r. Nothing was changed. If this is a local edit, reinstall SGLang '
            '(pip install --force-reinstall --no-deps sglang==%s); if it is a newer release, leave %s out of the patches option.'
            % (site, path, version, miss.msg, known, shape.name, miss.expected, miss.found, version, site),
            site=site, file=path, sglang_version=version, expected=miss.expected, found=miss.found, line=miss.line)
    raise PatchError(
        'Site %s not found in SGLang %s at %s: none of its files (%s) exists or has a known shape [%s]. Nothing was changed. '
        'Leave %s out of the patches option if this release no longer has it.'
        % (site, version, ws.package_dir, ', '.join(files), known, site),
        site=site, file=None, sglang_version=version, expected=known, found=None)


def default_sites():
    return list(SITE_NAMES)


def plan(package_dir, state, version, sites=None, glm5_only=True):
    """Plan every requested site.  Returns (workspace, site_results).  Raises PatchError, writes nothing."""
    explicit = sites is not None
    wanted = []
    for site in (sites if explicit else default_sites()):
        if site not in wanted:
            wanted.append(site)
    ws = Workspace(package_dir)
    results = []
    for site in wanted:
        if site not in SITE_NAMES:
            raise PatchError('Unknown site name %r; known sites: %s' % (site, ', '.join(SITE_NAMES)), site=site)
        result = plan_site(ws, site, state, version, glm5_only=glm5_only)
        results.append(result)
    if explicit and state == 'present':
        refused = [r for r in results if r['status'] in (NOT_PRESENT, UNSUPPORTED, UPSTREAM_SUPPORTS)]
        if refused:
            raise PatchError(
                'Cannot enable SM120 at the requested site(s) of SGLang %s: %s. Nothing was changed. Leave these sites out of '
                'the patches option (or omit the patches option to patch every site this release supports).'
                % (version, '; '.join('%s is %s: %s' % (r['name'], r['status'], r['reason']) for r in refused)),
                sites=results, sglang_version=version)
    return ws, results


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def compile_check(python, path, data, run):
    """Byte-compile ``data`` (bytes) with the target's interpreter, as if it were ``path``."""
    argv = [python, '-c', COMPILE_SNIPPET, path]
    rc, out, err = run(argv, data)
    if rc != 0:
        raise PatchError('The patched text of %s does not compile with %s (rc=%s): %s. Nothing was changed; '
                         'report this with the SGLang version.' % (path, python, rc, (err or out).strip()[-1500:]),
                         file=path, rc=rc, stderr=err, stdout=out)


def _writable_problem(path):
    try:
        st = os.stat(path)
    except OSError as exc:
        return 'cannot stat it (%s)' % exc
    if not st.st_mode & 0o200:
        return 'it is read-only (mode %04o)' % (st.st_mode & 0o7777)
    if not os.access(path, os.W_OK):
        return 'this user (uid %d) may not write it (mode %04o, owner %d)' % (os.getuid(), st.st_mode & 0o7777, st.st_uid)
    parent = os.path.dirname(path)
    if not os.access(parent, os.W_OK | os.X_OK):
        return 'its directory %s is not writable by this user (a temporary file is created there for the atomic replace)' % parent
    return None


def _stale_bytecode(path):
    directory, name = os.path.split(path)
    stem = name[:-3] if name.endswith('.py') else name
    return sorted(glob.glob(os.path.join(directory, '__pycache__', '%s.cpython-*.pyc' % glob.escape(stem))))


def _default_move(src, dest):
    st = os.stat(dest)
    os.chmod(src, st.st_mode & 0o7777)
    if hasattr(os, 'chown'):
        try:
            os.chown(src, st.st_uid, st.st_gid)
        except OSError:
            pass
    os.rename(src, dest)


def write(ws, python, run, move=None, backup=None):
    """Compile every changed file, then replace them atomically.  Returns (changed_paths, backup_files).

    ``move(src, dest)`` replaces dest keeping owner/group/mode (AnsibleModule.atomic_move);
    ``backup(path)`` returns the backup's path (AnsibleModule.backup_local).
    """
    move = move or _default_move
    changed = ws.changed_files()
    new_data = {}
    for rel in changed:
        path = ws.path(rel)
        problem = _writable_problem(path)
        if problem:
            raise PatchError('Cannot replace %s: %s. Nothing was changed. Make the SGLang install writable '
                             '(for example chmod u+w %s) or run as its owner (become).' % (path, problem, path), file=path)
        new_data[rel] = ws.text(rel).encode('utf-8')
        compile_check(python, path, new_data[rel], run)
    backups = []
    done = []
    # Once the first file is replaced, a lost controller (its session hung up) must not leave a mixed set.
    with shielded():
        _replace_all(ws, changed, new_data, move, backup, backups, done)
    for rel in changed:
        for pyc in _stale_bytecode(ws.path(rel)):
            try:
                os.unlink(pyc)
            except OSError:
                pass
    return [ws.path(rel) for rel in changed], backups


def _replace_all(ws, changed, new_data, move, backup, backups, done):
    """Replace every changed file; on a failure put back those already replaced and raise PatchError."""
    try:
        for rel in changed:
            path = ws.path(rel)
            with open(path, 'rb') as handle:
                if handle.read() != ws.original[rel]:
                    raise PatchError('%s changed on disk while this run planned its edits (another run or a pip install?)' % path)
            if backup is not None:
                backups.append(backup(path))
            write_atomic(path, new_data[rel], move, suffix='.sm120tmp')
            done.append(rel)
    except Exception as exc:
        rollback_errors = []
        for rel in done:
            try:
                write_atomic(ws.path(rel), ws.original[rel], move, suffix='.sm120tmp')
            except Exception as exc2:  # pylint: disable=broad-except
                rollback_errors.append('%s: %s' % (ws.path(rel), exc2))
        full = exc.to_json() if isinstance(exc, NoSpaceError) else None
        raise PatchError('Writing %s failed (%s); %s' % (
            ws.path(changed[len(done)]) if len(done) < len(changed) else 'the patched files',
            exc.strerror if full else exc,
            'the files already written were restored' if not rollback_errors
            else 'restoring failed for: %s - reinstall SGLang' % '; '.join(rollback_errors)),
            files_restored=[ws.path(r) for r in done], rollback_errors=rollback_errors, backup_files=backups,
            **({'no_space': full} if full else {}))


def diffs(ws):
    """before/after diff dicts (Ansible's diff format) for each file that would change."""
    out = []
    for rel in ws.changed_files():
        path = ws.path(rel)
        out.append({
            'before': ws.original[rel].decode('utf-8'),
            'after': ws.text(rel),
            'before_header': path,
            'after_header': path,
        })
    return out


def run_patch(params, run, check_mode=False, want_diff=False, move=None, backup=None):
    """Do one module run.  ``params`` as the module's; returns the result dict or raises PatchError."""
    result = {'changed': False, 'sites': [], 'backup_files': [], 'sglang_version': None, 'version_source': None}
    install = locate(params.get('python'), run, params.get('sglang_path'))
    python = resolve_python(params.get('python') or 'python3')
    package_dir, version, source = install.path, install.version, install.version_source
    result.update(install.to_json())
    try:
        ws, sites = plan(package_dir, params.get('state') or 'present', version, params.get('patches'),
                         glm5_only=params.get('glm5_only', True))
    except PatchError as err:
        err.context.setdefault('sglang_version', version)
        err.context.setdefault('version_source', source)
        err.context.setdefault('sglang_path', package_dir)
        raise
    result['sites'] = sites
    result['_flashinfer_version'] = dist_version(package_dir, 'flashinfer_python')
    changed = ws.changed_files()
    result['changed'] = bool(changed)
    if want_diff and changed:
        result['diff'] = diffs(ws)
    if changed and check_mode:
        # compiling reads nothing on disk: check mode also proves the new text is valid for the target's Python
        for rel in changed:
            compile_check(python, ws.path(rel), ws.text(rel).encode('utf-8'), run)
    if changed and not check_mode:
        try:
            _paths, backups = write(ws, python, run, move=move, backup=backup)
        except PatchError as err:
            err.context.setdefault('sites', sites)
            err.context.setdefault('sglang_version', version)
            raise
        result['backup_files'] = backups
    return result
