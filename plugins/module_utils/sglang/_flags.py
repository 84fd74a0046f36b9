# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The command-line flags an installed SGLang release defines, read from its source with ``ast``.

Private module_utils: runs on the target host, Python 3.9+, standard library only.  Importing SGLang needs the
GPU stack (torch, CUDA), so the server's argument parser is never built; its definition is read instead:

* ``ServerArgs.add_cli_args`` in ``sglang/srt/server_args.py`` and every function it hands the parser to
  (methods of the class, module functions, functions imported from other SGLang modules), following the
  ``parser.add_argument("--flag", "--alias", dest=..., action=...)`` calls of each;
* from 0.5.14, ``add_cli_args_from_dataclass(parser, ServerArgs)``, which derives flags from annotated fields
  (``A[T, "help"]`` / ``A[T, Arg(aliases=..., cli_name=..., action=..., no_cli=...)]``) of ``ServerArgs``, its
  bases and (0.5.23) the namespace classes in ``sglang/srt/arg_groups/fields/`` that ``ServerArgs`` collects.

:func:`parse_server_flags` is a pure function of source texts; :func:`read_package_sources` makes the loader for
an installed package directory.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re

ENTRY_MODULE = 'sglang.srt.server_args'
ENTRY_CLASS = 'ServerArgs'
ENTRY_METHOD = 'add_cli_args'

# argparse actions (by their registry name) that take no value on the command line.
_ZERO_ARG_ACTIONS = ('store_true', 'store_false', 'store_const', 'append_const', 'count', 'help', 'version')
# argparse's own Action classes that take no value (bases of custom actions).
_ZERO_ARG_CLASSES = ('_StoreTrueAction', '_StoreFalseAction', '_StoreConstAction', '_AppendConstAction', '_CountAction',
                     '_HelpAction', '_VersionAction', 'BooleanOptionalAction')
_BOOL_OPTIONAL = 'BooleanOptionalAction'
_DATACLASS_HELPERS = ('add_cli_args_from_dataclass',)
_ANNOTATED_NAMES = ('A', 'Annotated')
_GROUP_FACTORIES = ('add_argument_group', 'add_mutually_exclusive_group')
_MAX_DEPTH = 12


class FlagSourceError(Exception):
    """The parser definition could not be found in the given sources."""


# ---------------------------------------------------------------------------------------------------------------
# Source access
# ---------------------------------------------------------------------------------------------------------------

def module_relpath(modname):
    """``sglang.srt.server_args`` -> (``sglang/srt/server_args.py``, ``sglang/srt/server_args/__init__.py``)."""
    base = modname.replace('.', '/')
    return base + '.py', base + '/__init__.py'


def read_package_sources(package_dir):
    """Return a loader ``modname -> text or None`` reading ``sglang.*`` modules below an installed package dir."""
    root = os.path.dirname(os.path.abspath(package_dir))
    name = os.path.basename(os.path.abspath(package_dir))

    def load(modname):
        if modname != name and not modname.startswith(name + '.'):
            return None
        for rel in module_relpath(modname):
            path = os.path.join(root, *rel.split('/'))
            try:
                with open(path, 'rb') as handle:
                    return handle.read().decode('utf-8', 'replace')
            except OSError:
                continue
        return None
    return load


class _Sources:
    """Parsed modules, loaded on demand; remembers what it read."""

    def __init__(self, sources):
        if callable(sources):
            self._load = sources
        else:
            texts = dict(sources or {})

            def load(modname):
                for rel in module_relpath(modname):
                    if rel in texts:
                        return texts[rel]
                return texts.get(modname)
            self._load = load
        self._trees = {}
        self.read = []
        self.errors = []

    def tree(self, modname):
        if modname in self._trees:
            return self._trees[modname]
        tree = None
        text = self._load(modname)
        if text is not None:
            try:
                tree = ast.parse(text)
                self.read.append(module_relpath(modname)[0])
            except SyntaxError as exc:
                self.errors.append('%s: syntax error at line %s: %s' % (module_relpath(modname)[0], exc.lineno, exc.msg))
        self._trees[modname] = tree
        return tree


# ---------------------------------------------------------------------------------------------------------------
# Small AST helpers
# ---------------------------------------------------------------------------------------------------------------

def _const_str(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _literal_text(node):
    """Best-effort text of a help string: constants, implicit concatenation, f-string constant parts."""
    if node is None:
        return ''
    text = _const_str(node)
    if text is not None:
        return text
    if isinstance(node, ast.JoinedStr):
        return ''.join(_literal_text(v) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_text(node.left) + _literal_text(node.right)
    return ''


def _name_of(node):
    """Last name of a Name / Attribute chain (``argparse.BooleanOptionalAction`` -> ``BooleanOptionalAction``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _keywords(call):
    return dict((kw.arg, kw.value) for kw in call.keywords if kw.arg)


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _find_class(tree, name):
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _find_function(body, name):
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def _resolve_relative(modname, level, module):
    parts = modname.split('.')
    # a module's package is its name minus the last part (modules loaded as packages are rare here)
    base = parts[:len(parts) - level] if level else []
    if module:
        base = base + module.split('.')
    return '.'.join(base)


def _imports(tree, modname):
    """``{local name: (module, attribute or None)}`` for the module-level imports of a tree."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            src = _resolve_relative(modname, node.level, node.module) if node.level else (node.module or '')
            for alias in node.names:
                out[alias.asname or alias.name] = (src, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = (alias.name, None)
                else:
                    out[alias.name.split('.')[0]] = (alias.name.split('.')[0], None)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The walker: finds definitions (_Resolver), reads add_argument() calls (_ArgumentReader) and annotated fields
# (_FieldReader) into one _Findings, following the functions the parser is handed to (_Walker)
# ---------------------------------------------------------------------------------------------------------------

class _Findings:
    """What a walk found: one dict per flag definition, and the definitions it could not follow."""

    def __init__(self):
        self.arguments = []
        self.warnings = []

    def record(self, flags, dest, action, takes_value, help_text, choices, where, source_kind='add_argument', value=None):
        if dest is None:
            longs = [f for f in flags if f.startswith('--')]
            dest = (longs[0] if longs else flags[0]).lstrip('-').replace('-', '_')
        text = help_text.strip().lower()
        deprecated = bool(action and 'deprecated' in action.lower()) or text.startswith(
            ('(deprecated', '[deprecated', 'deprecated')) or 'deprecated:' in text[:40]
        entry = {
            'flags': flags,
            'dest': dest,
            'action': action,
            'takes_value': takes_value,
            'deprecated': deprecated,
            'source': where,
            'defined_by': source_kind,
        }
        if isinstance(choices, (list, tuple)) and all(isinstance(c, (str, int, float)) for c in choices):
            entry['choices'] = list(choices)
        if takes_value and value:
            entry['value_type'] = value.get('type')
            entry['nargs'] = value.get('nargs')
        self.arguments.append(entry)


class _Resolver:
    """Finds where a name, a call or a constant is defined across the sources, following imports."""

    def __init__(self, sources):
        self.src = sources
        self._import_cache = {}

    def imports(self, modname):
        if modname not in self._import_cache:
            tree = self.src.tree(modname)
            self._import_cache[modname] = _imports(tree, modname) if tree is not None else {}
        return self._import_cache[modname]

    def resolve_name(self, modname, name, depth=0):
        """Find the definition of ``name`` as seen from module ``modname``: (modname, node) or (None, None)."""
        if depth > _MAX_DEPTH:
            return None, None
        tree = self.src.tree(modname)
        if tree is None:
            return None, None
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return modname, node
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return modname, node
        imported = self.imports(modname).get(name)
        if imported and imported[1] is not None:
            src_mod, attr = imported
            found = self.resolve_name(src_mod, attr, depth + 1)
            if found[0] is None and self.src.tree(src_mod + '.' + attr) is not None:
                return src_mod + '.' + attr, None
            return found
        return None, None

    def resolve_call(self, modname, cls, call):
        """Definition of the function a call goes to, if it lives in the sources."""
        func = call.func
        if isinstance(func, ast.Name):
            return self.resolve_name(modname, func.id)
        if isinstance(func, ast.Attribute):
            owner = func.value
            if isinstance(owner, ast.Name):
                if cls is not None and owner.id in ('self', 'cls', cls.name):
                    node = _find_function(cls.body, func.attr)
                    if node is not None:
                        return modname, node
                target_mod, target = self.resolve_name(modname, owner.id)
                if isinstance(target, ast.ClassDef):
                    node = _find_function(target.body, func.attr)
                    if node is not None:
                        return target_mod, node
                imported = self.imports(modname).get(owner.id)
                if imported is not None:
                    mod = imported[0] if imported[1] is None else imported[0] + '.' + imported[1]
                    if self.src.tree(mod) is not None:
                        return self.resolve_name(mod, func.attr)
        return None, None

    def class_of(self, modname, node):
        tree = self.src.tree(modname)
        if tree is None:
            return None
        for top in tree.body:
            if isinstance(top, ast.ClassDef) and node in top.body:
                return top
        return None

    def literal_value(self, modname, node, scope=None, depth=0):
        """A literal, or a name bound to one, else None: a module-level name (``choices=LOAD_FORMAT_CHOICES``, also
        imported) or a class attribute (``choices=Backend.ALL``) whose elements may name other attributes of the class
        (``ALL = (FULL, BREAKABLE)``); ``scope`` is that class."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.Name):
            bound = _class_assign(scope, node.id) if scope is not None else None
            if bound is not None:
                return self.literal_value(modname, bound.value, scope, depth + 1)
            found_mod, found = self.resolve_name(modname, node.id)
            return self.literal_value(found_mod, found.value, None, depth + 1) if isinstance(found, ast.Assign) else None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            cls_mod, cls = self.resolve_name(modname, node.value.id)
            bound = _class_assign(cls, node.attr) if isinstance(cls, ast.ClassDef) else None
            return self.literal_value(cls_mod, bound.value, cls, depth + 1) if bound is not None else None
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.literal_value(modname, elt, scope, depth + 1) for elt in node.elts]
            return None if any(item is None for item in items) else items
        return _literal(node)


def _class_assign(cls, name):
    """The ``name = ...`` statement in a class body, or None."""
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
    return None


class _ArgumentReader:
    """Reads one ``add_argument()`` call: its flags, dest, action, whether it takes a value, its type and choices."""

    def __init__(self, resolver, findings):
        self.resolver = resolver
        self.findings = findings

    def add_argument_call(self, modname, call):
        where = '%s:%s' % (module_relpath(modname)[0], call.lineno)
        names = []
        for arg in call.args:
            text = _const_str(arg)
            if text is None:
                self.findings.warnings.append('%s: add_argument() with a name that is not a string literal; skipped' % where)
                return
            names.append(text)
        flags = [n for n in names if n.startswith('-')]
        if not flags:
            return  # a positional argument
        kw = _keywords(call)
        action_node = kw.get('action')
        action = _const_str(action_node) if action_node is not None else None
        if action is None and action_node is not None:
            action = _name_of(action_node)
        nargs_node = kw.get('nargs')
        takes_value = self.takes_value(modname, action_node, nargs_node)
        dest = _const_str(kw.get('dest')) if 'dest' in kw else None
        if action == _BOOL_OPTIONAL:
            flags = flags + ['--no-' + f[2:] for f in flags if f.startswith('--')]
        help_text = _literal_text(kw.get('help'))
        choices = self.resolver.literal_value(modname, kw['choices']) if 'choices' in kw else None
        value = {'type': _argparse_type(kw.get('type')), 'nargs': _literal(nargs_node) if nargs_node is not None else None}
        self.findings.record(flags, dest, action, takes_value, help_text, choices, where, value=value)

    def takes_value(self, modname, action_node, nargs_node):
        if nargs_node is not None:
            nargs = _literal(nargs_node)
            if nargs == 0:
                return False
            if nargs is not None or (isinstance(nargs_node, ast.Constant) and nargs_node.value is None):
                return True
        if action_node is None:
            return True
        action = _const_str(action_node)
        if action is not None:
            return action not in _ZERO_ARG_ACTIONS
        return not self.zero_arg_class(modname, action_node)

    def zero_arg_class(self, modname, node, depth=0):
        name = _name_of(node)
        if name in _ZERO_ARG_CLASSES:
            return True
        if depth > _MAX_DEPTH or not isinstance(node, (ast.Name, ast.Attribute)):
            return False
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            imported = self.resolver.imports(modname).get(node.value.id)
            if imported is None:
                return False
            mod = imported[0] if imported[1] is None else imported[0] + '.' + imported[1]
            cmod, cls = self.resolver.resolve_name(mod, node.attr)
        else:
            cmod, cls = self.resolver.resolve_name(modname, name)
        if not isinstance(cls, ast.ClassDef):
            return False
        init = _find_function(cls.body, '__init__')
        if init is not None:
            args = init.args
            positional = args.args[len(args.args) - len(args.defaults):] if args.defaults else []
            pairs = list(zip(positional, args.defaults)) + list(zip(getattr(args, 'kwonlyargs', []), getattr(args, 'kw_defaults', [])))
            for arg, default in pairs:
                if arg.arg == 'nargs' and default is not None:
                    return _literal(default) == 0
            for sub in ast.walk(init):
                if isinstance(sub, ast.Call) and _name_of(sub.func) == '__init__':
                    nargs = _keywords(sub).get('nargs')
                    if nargs is not None and not isinstance(nargs, ast.Name):
                        return _literal(nargs) == 0
        return any(self.zero_arg_class(cmod, base, depth + 1) for base in cls.bases)


class _FieldReader:
    """Reads the flags ``add_cli_args_from_dataclass`` derives from a class's annotated fields (SGLang 0.5.14+)."""

    def __init__(self, resolver, findings, argument_reader):
        self.resolver = resolver
        self.findings = findings
        self.argument_reader = argument_reader

    def dataclass_call(self, modname, call):
        cls_node = None
        for arg in call.args[1:] + [kw.value for kw in call.keywords if kw.arg in ('cls', 'dataclass_cls')]:
            if isinstance(arg, ast.Name):
                cmod, found = self.resolver.resolve_name(modname, arg.id)
                if isinstance(found, ast.ClassDef):
                    cls_node = (cmod, found)
                    break
        if cls_node is None:
            self.findings.warnings.append('%s:%s: could not find the class whose fields become flags'
                                          % (module_relpath(modname)[0], call.lineno))
            return
        only = None
        for kw in call.keywords:
            if kw.arg == 'fields':
                only = _literal(kw.value)
        for fmod, fname, annotation, lineno in self.class_fields(cls_node[0], cls_node[1]):
            if only is not None and fname not in only:
                continue
            self.field_argument(fmod, fname, annotation, lineno)

    def class_fields(self, modname, cls, depth=0, seen=None):
        """(module, field name, annotation node, line) of a record class, its bases and collected namespaces."""
        seen = set() if seen is None else seen
        if depth > _MAX_DEPTH or (modname, cls.name) in seen:
            return []
        seen.add((modname, cls.name))
        out = []
        for base in cls.bases:
            if isinstance(base, ast.Name):
                bmod, bnode = self.resolver.resolve_name(modname, base.id)
                if isinstance(bnode, ast.ClassDef):
                    out.extend(self.class_fields(bmod, bnode, depth + 1, seen))
        for ns_mod, ns_cls in self.collected_namespaces(modname, cls.name):
            out.extend(self.class_fields(ns_mod, ns_cls, depth + 1, seen))
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if _name_of(_unstring(node.annotation)) == 'ClassVar':
                    continue
                out.append((modname, node.target.id, node.annotation, node.lineno))
        return out

    def collected_namespaces(self, modname, cls_name):
        """Classes whose fields are merged into ``cls_name.__annotations__`` at module level (SGLang 0.5.23+)."""
        tree = self.resolver.src.tree(modname)
        found = []
        if tree is None:
            return found
        spreads = []
        for node in tree.body:
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Dict):
                continue
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and target.attr == '__annotations__'
                        and isinstance(target.value, ast.Name) and target.value.id == cls_name):
                    spreads.extend(v.id for k, v in zip(node.value.keys, node.value.values) if k is None and isinstance(v, ast.Name))
        for var in spreads:
            producer = None
            for node in tree.body:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for target in node.targets:
                        names = [t.id for t in (target.elts if isinstance(target, ast.Tuple) else [target]) if isinstance(t, ast.Name)]
                        if var in names:
                            producer = node.value
            if producer is None:
                self.findings.warnings.append('%s: %s.__annotations__ takes fields from %s, which was not understood'
                                              % (module_relpath(modname)[0], cls_name, var))
                continue
            for arg in producer.args:
                classes = []
                if isinstance(arg, (ast.List, ast.Tuple)):
                    classes = arg.elts
                elif isinstance(arg, ast.Name):
                    _m, listing = self.resolver.resolve_name(modname, arg.id)
                    if isinstance(listing, ast.Assign) and isinstance(listing.value, (ast.List, ast.Tuple)):
                        classes = listing.value.elts
                for elt in classes:
                    if isinstance(elt, ast.Name):
                        cmod, cnode = self.resolver.resolve_name(modname, elt.id)
                        if isinstance(cnode, ast.ClassDef):
                            found.append((cmod, cnode))
                        else:
                            self.findings.warnings.append('%s: field namespace class %s was not found in the sources'
                                                          % (module_relpath(modname)[0], elt.id))
        return found

    def field_argument(self, modname, name, annotation, lineno):
        where = '%s:%s' % (module_relpath(modname)[0], lineno)
        ann = _unstring(annotation)
        if not (isinstance(ann, ast.Subscript) and _name_of(ann.value) in _ANNOTATED_NAMES):
            return  # no CLI metadata: registered by hand, if at all
        items = _subscript_items(ann)
        if not items:
            return
        inner, extras = items[0], items[1:]
        meta = None
        for extra in extras:
            if isinstance(extra, ast.Call) and _name_of(extra.func) == 'Arg':
                meta = _keywords(extra)
                break
            if _const_str(extra) is not None:
                meta = {'help': extra}
                break
        if meta is None:
            return
        if 'no_cli' in meta and _literal(meta['no_cli']) is True:
            return
        cli_name = _const_str(meta.get('cli_name')) or '--' + name.replace('_', '-')
        aliases = _literal(meta['aliases']) if 'aliases' in meta else None
        flags = [cli_name] + [a for a in (aliases or []) if isinstance(a, str)]
        help_text = _literal_text(meta.get('help'))
        choices = self.resolver.literal_value(modname, meta['choices']) if 'choices' in meta else None
        action_node = meta.get('action')
        if action_node is not None and not (isinstance(action_node, ast.Constant) and action_node.value is None):
            action = _const_str(action_node) or _name_of(action_node)
            if action == _BOOL_OPTIONAL:
                flags = flags + ['--no-' + f[2:] for f in flags if f.startswith('--')]
            nargs_node = meta.get('nargs')
            action_kwargs = meta.get('action_kwargs')
            if isinstance(action_kwargs, ast.Dict):
                for key, value in zip(action_kwargs.keys, action_kwargs.values):
                    if _const_str(key) == 'nargs':
                        nargs_node = value
            takes_value = self.argument_reader.takes_value(modname, action_node, nargs_node)
            self.findings.record(flags, name, action, takes_value, help_text, choices, where, 'field',
                                 value={'type': None, 'nargs': _literal(nargs_node) if nargs_node is not None else None})
            return
        inner = _unwrap_optional(_unstring(inner))
        if _name_of(inner) == 'bool' and not isinstance(inner, ast.Subscript):
            self.findings.record(flags, name, 'store_true', False, help_text, choices, where, 'field')
            return
        value_type, nargs, choices = _field_value(inner, meta, choices)
        self.findings.record(flags, name, None, True, help_text, choices, where, 'field', value={'type': value_type, 'nargs': nargs})


class _Walker:
    """Walks ``add_cli_args`` and every function it hands the parser to, passing each definition to its reader."""

    def __init__(self, sources):
        self.resolver = _Resolver(sources)
        self.findings = _Findings()
        self.argument_reader = _ArgumentReader(self.resolver, self.findings)
        self.field_reader = _FieldReader(self.resolver, self.findings, self.argument_reader)
        self._visited = set()

    @property
    def arguments(self):
        return self.findings.arguments

    @property
    def warnings(self):
        return self.findings.warnings

    def walk_function(self, modname, func, cls, depth=0):
        key = (modname, func.name, func.lineno)
        if key in self._visited or depth > _MAX_DEPTH:
            return
        self._visited.add(key)
        params = [a.arg for a in func.args.args + getattr(func.args, 'kwonlyargs', [])]
        parsers = set(p for p in params if p not in ('self', 'cls'))
        # names bound to argument groups of the parser
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _name_of(node.value.func) in _GROUP_FACTORIES:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        parsers.add(target.id)
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            fname = _name_of(node.func)
            if fname == 'add_argument' and isinstance(node.func, ast.Attribute):
                self.argument_reader.add_argument_call(modname, node)
                continue
            if fname in _GROUP_FACTORIES:
                continue
            passes_parser = any(isinstance(a, ast.Name) and a.id in parsers for a in node.args) or any(
                isinstance(kw.value, ast.Name) and kw.value.id in parsers for kw in node.keywords)
            if not passes_parser:
                continue
            target_mod, target = self.resolver.resolve_call(modname, cls, node)
            if fname in _DATACLASS_HELPERS or (isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)) and _derives_from_fields(target)):
                self.field_reader.dataclass_call(modname, node)
                continue
            if isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.walk_function(target_mod, target, self.resolver.class_of(target_mod, target), depth + 1)
            elif fname not in ('print', 'setattr', 'getattr'):
                self.findings.warnings.append('%s:%s: the parser is passed to %s(), whose source was not found; flags it adds are not known'
                                              % (module_relpath(modname)[0], node.lineno, fname or '<call>'))


_BUILTIN_TYPES = ('int', 'float', 'str')


def _argparse_type(node):
    """What argparse converts an ``add_argument()`` value with: ``int``, ``float`` or ``str`` (also when ``type`` is
    not given), ``custom`` for any other callable (a parser of SGLang's own, ``json.loads``)."""
    if node is None:
        return 'str'
    name = _name_of(node) if isinstance(node, ast.Name) else None
    return name if name in _BUILTIN_TYPES else 'custom'


def _annotation_type(node):
    """SGLang's ``_infer_type_func``: ``int``, ``float`` or ``str`` for those annotations, ``str`` for any other."""
    name = _name_of(node) if isinstance(node, ast.Name) else None
    return name if name in _BUILTIN_TYPES else 'str'


def _field_value(inner, meta, choices):
    """``(type, nargs, choices)`` that SGLang's ``add_cli_args_from_dataclass`` hands argparse for a value field
    (``arg_groups/arg_utils.py``): ``Literal[...]`` converts with the type of its first value and takes its values
    as choices (``Arg(choices=...)`` wins, also when it cannot be read here: then the choices are unknown);
    ``List[X]`` converts with X's type, nargs ``+``; any other annotation with int, float or str;
    ``Arg(type_parser=...)`` converts with SGLang's own parser (``custom``)."""
    custom = 'type_parser' in meta
    nargs = _literal(meta['nargs']) if 'nargs' in meta else None
    head = _name_of(inner.value) if isinstance(inner, ast.Subscript) else None
    if head == 'Literal':
        values = [_literal(v) for v in _subscript_items(inner)]
        if 'choices' not in meta:
            choices = values
        first = {str: 'str', int: 'int', float: 'float'}.get(type(values[0]), 'str') if values else 'str'
        return ('custom' if custom else first), None, choices
    if head in ('List', 'list') and not custom:
        items = _subscript_items(inner)
        return _annotation_type(_unstring(items[0]) if items else None), nargs or '+', choices
    return ('custom' if custom else _annotation_type(inner)), nargs, choices


def _derives_from_fields(func):
    """A helper that registers ``add_argument(*names, ...)`` for every field of a class it is given."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and _name_of(node.func) == 'add_argument' and any(isinstance(a, ast.Starred) for a in node.args):
            return True
    return False


def _unstring(node):
    """A string annotation (``"Optional[int]"``) as an expression node."""
    text = _const_str(node)
    if text is not None:
        try:
            return ast.parse(text, mode='eval').body
        except SyntaxError:
            return node
    return node


def _subscript_items(node):
    sl = node.slice
    if sl.__class__.__name__ == 'Index':  # Python 3.8 AST
        sl = sl.value
    if isinstance(sl, ast.Tuple):
        return list(sl.elts)
    return [sl]


def _unwrap_optional(node):
    """``Optional[X]``, ``Union[X, None]``, ``X | None`` -> ``X``."""
    if isinstance(node, ast.Subscript) and _name_of(node.value) == 'Optional':
        return _unstring(_subscript_items(node)[0])
    if isinstance(node, ast.Subscript) and _name_of(node.value) == 'Union':
        items = [i for i in _subscript_items(node) if not (isinstance(i, ast.Constant) and i.value is None) and _name_of(i) != 'None']
        if len(items) == 1:
            return _unstring(items[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        items = [i for i in (node.left, node.right) if not (isinstance(i, ast.Constant) and i.value is None)]
        if len(items) == 1:
            return _unstring(items[0])
    return node


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------

def parse_server_flags(sources):
    """Flags of SGLang's server parser, from source texts.

    ``sources`` is a mapping of paths such as ``sglang/srt/server_args.py`` to source text, or a loader
    ``modname -> text or None``.  Returns a dict with ``flags`` (sorted option strings, aliases included),
    ``boolean_flags`` (flags that take no value: store_true/store_false/store_const/BooleanOptionalAction and custom
    actions with ``nargs=0``), ``deprecated_flags``, ``arguments`` (one dict per ``add_argument``: ``flags``, ``dest``,
    ``action``, ``takes_value``, ``deprecated``, ``choices`` when literal, ``source``), ``files`` (sources read) and
    ``warnings`` (definitions that could not be followed).  Raises FlagSourceError when ``ServerArgs.add_cli_args``
    is not there.
    """
    src = _Sources(sources)
    tree = src.tree(ENTRY_MODULE)
    if tree is None:
        detail = ': ' + '; '.join(src.errors) if src.errors else ''
        raise FlagSourceError('%s is missing or unreadable%s' % (module_relpath(ENTRY_MODULE)[0], detail))
    cls = _find_class(tree, ENTRY_CLASS)
    method = _find_function(cls.body, ENTRY_METHOD) if cls is not None else None
    if method is None:
        raise FlagSourceError('%s has no %s.%s(); this SGLang release defines its server flags in a way this module does not know'
                              % (module_relpath(ENTRY_MODULE)[0], ENTRY_CLASS, ENTRY_METHOD))
    walker = _Walker(src)
    walker.walk_function(ENTRY_MODULE, method, cls)
    flags = set()
    boolean = set()
    deprecated = set()
    for arg in walker.arguments:
        flags.update(arg['flags'])
        if not arg['takes_value']:
            boolean.update(arg['flags'])
        if arg['deprecated']:
            deprecated.update(arg['flags'])
    if not flags:
        raise FlagSourceError('no flags found in %s.%s() of %s' % (ENTRY_CLASS, ENTRY_METHOD, module_relpath(ENTRY_MODULE)[0]))
    return {
        'flags': sorted(flags),
        'boolean_flags': sorted(boolean),
        'deprecated_flags': sorted(deprecated),
        'values': flag_values(walker.arguments),
        'arguments': walker.arguments,
        'files': sorted(set(src.read)),
        'warnings': walker.warnings + src.errors,
    }


_FLAG_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_-]*$')


def valid_key(key):
    """Whether an argument key is a flag name the sglang_cli_args filter accepts (``tp_size``, ``--tp-size``)."""
    if not isinstance(key, str):
        return False
    return bool(_FLAG_NAME.match(key[2:] if key.startswith('--') else key))


def flag_for_key(key):
    """The flag an argument key renders to (the rules of the sglang_cli_args filter): ``tp_size`` -> ``--tp-size``."""
    key = str(key)
    bare = key[2:] if key.startswith('--') else key
    return '--' + bare.replace('_', '-')


def duplicate_keys(keys):
    """Keys that render to the same flag (``tp_size`` and ``tp-size``, ``--tp-size`` and ``tp-size``).

    Returns a list of ``(flag, [key, ...])`` in the order the flags first appear, one entry per flag named by more
    than one key.  Malformed keys (see :func:`valid_key`) are left out.  Only identical flag names count: argparse
    aliases (``--tensor-parallel-size`` for ``--tp-size``) are not resolved.
    """
    by_flag = {}
    for key in keys:
        if valid_key(key):
            by_flag.setdefault(flag_for_key(key), []).append(key)
    return [(flag, names) for flag, names in by_flag.items() if len(names) > 1]


def duplicate_message(flag, keys):
    """``'tp_size' and 'tp-size' both name --tp-size; ...``: what to say about one entry of :func:`duplicate_keys`."""
    names = [repr(k) for k in keys]
    listed = '%s and %s' % (', '.join(names[:-1]), names[-1])
    return ('%s %s name %s (keys are read without the leading -- and with _ as -), so %s would be given %d times and '
            'SGLang would silently use the last; keep one of them'
            % (listed, 'both' if len(keys) == 2 else 'all', flag, flag, len(keys)))


def close_matches(flag, known, n=3):
    """Flags that start with ``flag`` (what argparse would expand an abbreviation to), then difflib's closest."""
    known = sorted(known)
    out = [k for k in known if k.startswith(flag)][:n]
    scored = [(difflib.SequenceMatcher(None, flag, k).ratio(), k) for k in difflib.get_close_matches(flag, known, n=n + len(out), cutoff=0.6)]
    best = max([score for score, _k in scored] or [0.0])
    # a near miss (a typo) is the answer: far weaker matches beside it only distract
    for score, match in scored:
        if match not in out and score >= best - 0.15:
            out.append(match)
    return out[:n]


def flag_values(arguments):
    """``{flag: {type, choices, nargs, source}}`` for every flag whose values argparse checks (a builtin type or
    literal choices), from :func:`parse_server_flags`' ``arguments``."""
    out = {}
    for arg in arguments:
        if not arg['takes_value'] or not (arg.get('value_type') in ('int', 'float') or arg.get('choices')):
            continue
        spec = {'type': arg.get('value_type'), 'choices': arg.get('choices'), 'nargs': arg.get('nargs'), 'source': arg['source']}
        for flag in arg['flags']:
            out[flag] = spec
    return out


_TYPE_WORDS = {'int': 'an integer', 'float': 'a number'}


def _convert(text, value_type):
    """argparse's conversion of one command-line word, or raise ValueError."""
    if value_type == 'int':
        return int(text)
    if value_type == 'float':
        return float(text)
    return text


def value_problem(flag, spec, value):
    """Why SGLang's argparse would reject ``value`` for ``flag`` (``spec`` from :func:`flag_values`), or None."""
    if value is None or value is False:
        return None  # left out
    if isinstance(value, dict):
        value = _json_word(value)  # one JSON word on the command line: right for a text flag, never for a number
    if value is True:
        if spec.get('nargs') in ('?', '*'):
            return None
        return '%s takes a value%s; true would give the bare flag' % (flag, _expected(spec))
    words = value if isinstance(value, list) else [value]
    if isinstance(value, list) and spec.get('nargs') is None:
        return '%s takes one value%s, not a list' % (flag, _expected(spec))
    for word in words:
        if isinstance(word, (dict, list)):
            word = _json_word(word)
        try:
            if isinstance(word, bool):
                raise ValueError(word)
            converted = _convert(str(word), spec.get('type'))
        except ValueError:
            return '%s expects %s%s, not %r (%s)' % (flag, _TYPE_WORDS.get(spec.get('type'), 'a word'), _choices(spec), word,
                                                     spec['source'])
        if spec.get('choices') and converted not in spec['choices'] and str(word) not in [str(c) for c in spec['choices']]:
            return '%s must be one of %s, not %r (%s)' % (flag, ', '.join(str(c) for c in spec['choices']), word, spec['source'])
    return None


def _json_word(value):
    """A dict or list as the command line gets it (sglang_cli_args writes it as compact JSON)."""
    return json.dumps(value, separators=(',', ':'), sort_keys=True)


def _choices(spec):
    return ' from %s' % ', '.join(str(c) for c in spec['choices']) if spec.get('choices') else ''


def _expected(spec):
    if spec.get('choices'):
        return ' (one of %s)' % ', '.join(str(c) for c in spec['choices'])
    return ' (%s)' % _TYPE_WORDS[spec['type']] if spec.get('type') in _TYPE_WORDS else ''


def check_args(args, parsed):
    """Compare user arguments (the filter's dict) with parsed flags: the one rule of the module and the filter.

    ``parsed`` has ``flags`` (None: names are not checked), ``boolean_flags`` (None: switches are not checked) and
    optionally ``values`` (:func:`flag_values`). Returns ``(unknown, problems)``: ``unknown`` is a list of dicts
    ``{key, flag, did_you_mean}`` for flags the release does not define; ``problems`` is a list of messages for
    arguments that cannot be right (a malformed name, a non-boolean value for a switch, a value argparse would refuse
    for its type or choices, two keys that name the same flag).
    """
    known = set(parsed['flags']) if parsed.get('flags') is not None else None
    boolean = set(parsed.get('boolean_flags') or [])
    values = parsed.get('values') or {}
    unknown = []
    problems = []
    for key, value in (args or {}).items():
        if not valid_key(key):
            problems.append('%r is not a valid SGLang flag name; use names such as model-path or tp_size' % (key,))
            continue
        flag = flag_for_key(key)
        if known is not None and flag not in known:
            if all(item['flag'] != flag for item in unknown):  # tp_size and tp-size: one unknown flag
                unknown.append({'key': key, 'flag': flag, 'did_you_mean': close_matches(flag, known)})
        elif flag in boolean and value is not None and not isinstance(value, bool):
            problems.append('%s takes no value (it is a switch); give it true or false, not %r' % (flag, value))
        elif flag in values:
            problem = value_problem(flag, values[flag], value)
            if problem:
                problems.append(problem)
    problems.extend(duplicate_message(flag, keys) for flag, keys in duplicate_keys(args or {}))
    return unknown, problems


def unknown_message(unknown, version=None, release='the installed SGLang'):
    """``the installed SGLang 0.5.9 does not define this flag: --mem-fraction-statc (did you mean ...?)``; ``release``
    names where the flags were read (a dry run reads the wheel it would install)."""
    parts = []
    for item in unknown:
        hint = ' (did you mean %s?)' % ' or '.join(item['did_you_mean']) if item['did_you_mean'] else ''
        parts.append('%s%s' % (item['flag'], hint))
    what = 'this flag' if len(unknown) == 1 else 'these flags'
    return '%s%s does not define %s: %s' % (release, ' ' + version if version else '', what, '; '.join(parts))
