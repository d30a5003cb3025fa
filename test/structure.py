#!/usr/bin/env python3
"""test/structure.py: the structural checks of pmhash's source tree.

Checks, each reported as a TAP-like line "ok N - ..." / "not ok N - ..."
(with "# " lines of detail after a failure), and exits non-zero if any
fails:

  1. src/README's "Source files" section places every glue file src/*.c in
     one layer, and names no file that does not exist;
  2. no call cycle among the glue files, leaving out the AM handler
     src/pmhash.c, which reaches every callback by design (a file depends on
     another when it calls, or otherwise uses, a non-static function or a
     global variable defined there; uses through a static inline function
     or a macro of a src/*.h header count as uses of what they expand to);
  3. the glue depends only downward: no file uses a function or global
     variable of a file in a higher layer than its own (files of one layer
     may use each other, as long as there is no cycle);
  4. src/core/ includes no PostgreSQL header: only standard C and system
     headers, and the core's own;
  5. no .c file of src/ or src/core/ is over the size limit;
  6. every function definition of src/*.c and src/core/*.c has a comment
     directly above it.

The layers and the size limit are read from src/README ("Source files"), so
that the document stays the one statement of them: the check fails if the
section cannot be read, if it misses a glue file or names one that does not
exist.

Usage: test/structure.py [ROOT]        check the tree at ROOT (default: this
                                       repository)
       test/structure.py --self-test   build a small tree with one deliberate
                                       violation of each rule (and look-alikes
                                       that are not violations) in a temporary
                                       directory and check that each violation
                                       is reported and no look-alike is

Python 3 standard library only.
"""

import argparse
import bisect
import collections
import glob
import os
import re
import shutil
import sys
import tempfile

# The AM handler: it reaches every callback by design, so it is left out of
# the cycle check (it still has a layer, the top one).
HANDLER_FILE = "pmhash.c"

# Standard C headers (C17) and the POSIX / Linux system headers the core may
# include; anything else in angle brackets is taken as foreign (PostgreSQL's
# headers among them).  Add a system header here when the core needs one.
STANDARD_C_HEADERS = {
    "assert.h", "complex.h", "ctype.h", "errno.h", "fenv.h", "float.h", "inttypes.h",
    "iso646.h", "limits.h", "locale.h", "math.h", "setjmp.h", "signal.h", "stdalign.h",
    "stdarg.h", "stdatomic.h", "stdbool.h", "stddef.h", "stdint.h", "stdio.h", "stdlib.h",
    "stdnoreturn.h", "string.h", "tgmath.h", "threads.h", "time.h", "uchar.h", "wchar.h",
    "wctype.h",
}
SYSTEM_HEADERS = {
    "dirent.h", "dlfcn.h", "endian.h", "fcntl.h", "poll.h", "pthread.h", "sched.h",
    "semaphore.h", "strings.h", "unistd.h", "cpuid.h", "arm_acle.h", "arm_neon.h",
}
SYSTEM_HEADER_PATTERNS = (
    re.compile(r"^(sys|linux|asm|arpa|netinet)/[\w/]+\.h$"),
    re.compile(r"^\w*intrin\.h$"),  # compiler intrinsics: immintrin.h, x86intrin.h, ...
)

# Words that may end a declaration before its body but are not function names.
ATTRIBUTE_WORD = re.compile(r"^(__attribute__|__declspec|pg_attribute_\w+|pg_nodiscard|pg_noreturn)$")
C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
    "typedef", "union", "unsigned", "void", "volatile", "while", "_Bool", "_Static_assert",
}

TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|->|\S")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*$")


Token = collections.namedtuple("Token", "text line")
Function = collections.namedtuple("Function", "name line start_line is_static body")
Variable = collections.namedtuple("Variable", "name line is_static")
Comment = collections.namedtuple("Comment", "start_line end_line")
Use = collections.namedtuple("Use", "symbol lines via")


def blank_comments_and_literals(text):
    """Return (text without comments, text without comments and literals, comments): comments,
    and in the second text string and character literals, become spaces, newlines are kept,
    so lines and columns stay where they were."""
    no_comments = []
    no_literals = []
    comments = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            chunk = text[i:end]
            blank = re.sub(r"[^\n]", " ", chunk)
            comments.append(Comment(line, line + chunk.count("\n")))
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            chunk = text[i:end]
            blank = " " * len(chunk)
            comments.append(Comment(line, line))
        elif c in "\"'":
            end = i + 1
            while end < n and text[end] != c and text[end] != "\n":
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
            chunk = text[i:end]
            no_comments.append(chunk)
            closed = len(chunk) >= 2 and chunk.endswith(c)
            interior = chunk[1:-1] if closed else chunk[1:]
            no_literals.append(c + re.sub(r"[^\n]", " ", interior) + (c if closed else ""))
            line += chunk.count("\n")
            i = end
            continue
        else:
            end = i + 1
            while end < n and text[end] not in "/\"'":
                end += 1
            chunk = blank = text[i:end]
        no_comments.append(blank)
        no_literals.append(blank)
        line += chunk.count("\n")
        i = end
    return "".join(no_comments), "".join(no_literals), comments


def preprocessor_lines(code):
    """Return the set of line numbers (1-based) that belong to preprocessor directives,
    continuation lines included."""
    directive_lines = set()
    continuing = False
    for number, text in enumerate(code.split("\n"), 1):
        if continuing or text.lstrip().startswith("#"):
            directive_lines.add(number)
            continuing = text.rstrip().endswith("\\")
    return directive_lines


def tokenize(code, skip_lines=frozenset()):
    """Split C code (comments and literals already blanked) into tokens with their line numbers,
    leaving out the lines in skip_lines."""
    line_starts = [0] + [m.end() for m in re.finditer("\n", code)]
    tokens = []
    for m in TOKEN.finditer(code):
        line = bisect.bisect_right(line_starts, m.start())
        if line not in skip_lines:
            tokens.append(Token(m.group(), line))
    return tokens


def matching_open_paren(texts, close_index):
    """Index of the "(" that matches the ")" at close_index in a list of token texts, or -1."""
    depth = 0
    for i in range(close_index, -1, -1):
        if texts[i] == ")":
            depth += 1
        elif texts[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1


def function_head(declaration):
    """The Function (without body) that a top-level declaration followed by "{" defines, or None
    when the "{" opens something else (a struct, an initializer)."""
    texts = [t.text for t in declaration]
    if not texts or "=" in texts:
        return None
    end = len(texts) - 1
    while end >= 0 and texts[end] == ")":
        open_index = matching_open_paren(texts, end)
        if open_index <= 0:
            return None
        name = texts[open_index - 1]
        if ATTRIBUTE_WORD.match(name):  # an attribute after the parameters
            end = open_index - 2
            continue
        if not IDENTIFIER.match(name) or name in C_KEYWORDS:
            return None
        return Function(name, declaration[open_index - 1].line, declaration[0].line,
                        "static" in texts[:open_index - 1], None)
    return None


def split_top_level(texts, separator):
    """Split a list of token texts at the separators outside parentheses and brackets."""
    parts, current, depth = [], [], 0
    for text in texts:
        if text in "([":
            depth += 1
        elif text in ")]":
            depth -= 1
        if text == separator and depth == 0:
            parts.append(current)
            current = []
        else:
            current.append(text)
    parts.append(current)
    return parts


def declared_variables(declaration):
    """The Variables a top-level declaration ending in ";" defines (none for a prototype, a
    typedef, an extern declaration or a macro invocation such as PG_MODULE_MAGIC)."""
    texts = [t.text for t in declaration]
    if not texts or texts[0] == "typedef" or "extern" in texts:
        return []
    is_static = "static" in texts
    variables = []
    for position, part in enumerate(split_top_level(texts, ",")):
        declarator = split_top_level(part, "=")[0]
        if position == 0 and len(declarator) < 2:
            return []  # a lone word: a macro such as PG_MODULE_MAGIC
        # a pointer to function: "type (*name)(parameters)"
        pointer = re.search(r"\( \* ([A-Za-z_]\w*) \) \(", " ".join(declarator))
        if pointer:
            name = pointer.group(1)
        elif declarator and declarator[-1] == ")":
            return []  # a prototype or a macro invocation
        else:
            words = [w for w in strip_brackets(declarator) if IDENTIFIER.match(w)
                     and w not in C_KEYWORDS and not ATTRIBUTE_WORD.match(w)]
            if not words or declarator[-1] == "{}":
                continue  # a struct, union or enum definition with no variable
            name = words[-1]
        line = next(t.line for t in declaration if t.text == name)
        variables.append(Variable(name, line, is_static))
    return variables


def strip_brackets(texts):
    """Token texts without the array dimensions "[...]" in them."""
    kept, depth = [], 0
    for text in texts:
        if text == "[":
            depth += 1
        elif text == "]":
            depth -= 1
        elif depth == 0:
            kept.append(text)
    return kept


def is_declaration_only(declaration):
    """Whether a top-level declaration ending in ";" only declares (an extern declaration, a
    prototype, a macro invocation such as PG_FUNCTION_INFO_V1(name)): its names are no uses."""
    texts = [t.text for t in declaration]
    return "extern" in texts or (texts and texts[-1] == ")")


def parse_top_level(tokens):
    """The functions (with their body tokens) and global variables that a file's tokens define at
    the top level, and the tokens that count as uses: all but those of declarations that only
    declare."""
    functions, variables, use_tokens = [], [], []
    declaration = []
    braced = []  # the tokens of initializers and struct bodies of the declaration
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.text == "{":
            close = i + 1
            depth = 1
            while close < len(tokens) and depth > 0:
                depth += {"{": 1, "}": -1}.get(tokens[close].text, 0)
                close += 1
            head = function_head(declaration)
            if head:
                functions.append(head._replace(body=tokens[i:close]))
                use_tokens.extend(declaration)
                use_tokens.extend(tokens[i:close])
                declaration = []
            else:
                braced.extend(tokens[i:close])
                declaration.append(Token("{}", token.line))
            i = close
            continue
        if token.text == ";":
            variables.extend(declared_variables(declaration))
            if not is_declaration_only(declaration):
                use_tokens.extend(declaration + braced)
            declaration = []
            braced = []
        else:
            declaration.append(token)
        i += 1
    return functions, variables, use_tokens


def used_identifiers(tokens):
    """The identifiers a list of tokens uses, each with the sorted lines it is used on; member
    names after "." or "->" are not uses."""
    lines = collections.defaultdict(set)
    previous = None
    for token in tokens:
        if IDENTIFIER.match(token.text) and previous not in (".", "->"):
            lines[token.text].add(token.line)
        previous = token.text
    return {name: sorted(on) for name, on in lines.items()}


class SourceFile:
    """One C file or header, parsed: its lines, comments, functions, variables and the
    identifiers it uses."""

    def __init__(self, path, relative):
        """Read and parse the file at path; relative is its name as reports give it."""
        with open(path, encoding="utf-8", errors="replace") as f:
            self.text = f.read()
        self.relative = relative
        self.name = os.path.basename(path)
        self.lines = self.text.split("\n")
        self.line_count = self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1)
        self.code_with_literals, self.code, self.comments = blank_comments_and_literals(self.text)
        self.directive_lines = preprocessor_lines(self.code)
        self.code_lines = self.code.split("\n")
        self.functions, self.variables, use_tokens = parse_top_level(tokenize(self.code, self.directive_lines))
        directive_tokens = [t for t in tokenize(self.code) if t.line in self.directive_lines]
        self.uses = used_identifiers(use_tokens + directive_tokens)
        self.macros = self._macros()

    def _macros(self):
        """The identifiers each #define of the file uses in its body, by macro name."""
        macros = {}
        logical_lines = re.sub(r"\\\n", " ", self.code).split("\n")
        for text in logical_lines:
            m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?(.*)", text)
            if m:
                macros[m.group(1)] = {t.text for t in tokenize(m.group(3)) if IDENTIFIER.match(t.text)}
        return macros

    def defines(self, include_static):
        """The names of the functions and variables the file defines, by name: (kind, line)."""
        names = {}
        for v in self.variables:
            if include_static or not v.is_static:
                names.setdefault(v.name, ("variable", v.line))
        for f in self.functions:
            if include_static or not f.is_static:
                names.setdefault(f.name, ("function", f.line))
        return names

    def comment_above(self, line):
        """Whether a comment ends on the line above the given line (conditional directives such
        as #if may stand between them), alone on its lines."""
        above = line - 1
        while above >= 1 and re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b", self.lines[above - 1]):
            above -= 1
        if above < 1 or self.code_lines[above - 1].strip():
            return False
        for comment in self.comments:
            if comment.end_line == above:
                return not self.code_lines[comment.start_line - 1].strip()
        return False


class Tree:
    """The source tree under a root directory: the glue files, the headers, the core."""

    def __init__(self, root):
        """Parse every src/*.c, src/*.h, src/core/*.c and src/core/*.h under root."""

        def parse(pattern):
            """Parse the files matching pattern, relative to root."""
            return [SourceFile(p, os.path.relpath(p, root))
                    for p in sorted(glob.glob(os.path.join(root, pattern)))]

        self.glue = parse("src/*.c")
        self.glue_headers = parse("src/*.h")
        self.core = parse("src/core/*.c")
        self.core_headers = parse("src/core/*.h")
        self.readme_path = os.path.join(root, "src", "README")


# ---------------------------------------------------------------------------
# src/README's "Source files" section
# ---------------------------------------------------------------------------


class ReadmeError(Exception):
    """src/README's "Source files" section cannot be read as the checks need."""


def readme_section(text, title):
    """The lines of the section of text under the heading title (underlined with dashes), up
    to the next such heading."""
    lines = text.split("\n")
    heading = re.compile(r"^-{3,}\s*$")
    for i in range(len(lines) - 1):
        if lines[i].strip() == title and heading.match(lines[i + 1]):
            section = []
            for j in range(i + 2, len(lines)):
                if j + 1 < len(lines) and lines[j].strip() and heading.match(lines[j + 1]):
                    break
                section.append(lines[j])
            return section
    raise ReadmeError('no section "%s" (a title underlined with dashes)' % title)


def without_parentheses(text):
    """Text with every parenthesized remark, nested ones included, removed."""
    previous = None
    while previous != text:
        previous = text
        text = re.sub(r"\([^()]*\)", " ", text)
    return text


def read_layers(section):
    """The glue layers of the section, lowest first: a list of (layer name, [file names]).

    The table follows the sentence "depends only downward" and ends at a blank line; a layer's
    line starts with two spaces, its name, two or more spaces and its files; lines indented
    deeper continue the layer above.  Remarks in parentheses are not file names."""
    start = next((i for i, line in enumerate(section) if "depends only downward" in line), None)
    if start is None:
        raise ReadmeError('no sentence "The glue ... depends only downward" before the layers')
    layers = []
    for line in section[start + 1:]:
        if not line.strip():
            if layers:
                break
            continue
        new_layer = re.match(r"^  (\S(?:.*?\S)?)\s{2,}(\S.*)$", line)
        if new_layer and not line.startswith("   "):
            layers.append([new_layer.group(1), new_layer.group(2)])
        elif re.match(r"^\s{3,}\S", line) and layers:
            layers[-1][1] += " " + line.strip()
        else:
            break
    if not layers:
        raise ReadmeError("no layer table after \"depends only downward\"")
    return [(name, re.findall(r"\b[\w-]+\.[ch]\b", without_parentheses(text))) for name, text in layers]


def read_size_limit(section):
    """The line limit the section states as "Size limit: ... N lines ..."."""
    m = re.search(r"Size limit:.*?(\d[\d,]*) lines", " ".join(section))
    if not m:
        raise ReadmeError('no "Size limit: ... N lines" sentence')
    return int(m.group(1).replace(",", ""))


def read_source_files_section(tree):
    """The lines of the tree's src/README section "Source files"."""
    try:
        with open(tree.readme_path, encoding="utf-8") as f:
            return readme_section(f.read(), "Source files")
    except OSError as e:
        raise ReadmeError("cannot read src/README: %s" % e.strerror)


# ---------------------------------------------------------------------------
# The dependencies between glue files
# ---------------------------------------------------------------------------


def header_expansions(headers):
    """For every static inline function and macro of the glue headers, the identifiers it uses,
    transitively (a header function that uses another uses what that one uses)."""
    direct = {}
    for header in headers:
        for name, words in header.macros.items():
            direct.setdefault(name, set()).update(words)
        for function in header.functions:
            direct.setdefault(function.name, set()).update(used_identifiers(function.body))
    expanded = {}
    for name in direct:
        seen, pending = set(), [name]
        while pending:
            for word in direct.get(pending.pop(), ()):
                if word not in seen:
                    seen.add(word)
                    if word in direct:
                        pending.append(word)
        seen.discard(name)
        expanded[name] = seen
    return expanded


def glue_dependencies(tree):
    """For each glue file, the files it depends on, each with the uses that make it so:
    {file name: {file name: [Use]}}.  A file uses a name of another file when the name appears
    in its code (not in comments, strings or member accesses), unless it defines that name
    itself (a static function of the same name, say)."""
    owner = {}
    for source in tree.glue:
        for name in source.defines(include_static=False):
            owner.setdefault(name, source.name)
    expansions = header_expansions(tree.glue_headers)
    dependencies = {}
    for source in tree.glue:
        own = source.defines(include_static=True)
        uses = {name: Use(name, lines, None) for name, lines in source.uses.items()}
        for name, lines in source.uses.items():
            for word in expansions.get(name, ()):
                uses.setdefault(word, Use(word, lines, name))
        targets = collections.defaultdict(list)
        for name, use in uses.items():
            target = owner.get(name)
            if target and target != source.name and name not in own:
                targets[target].append(use)
        dependencies[source.name] = {t: sorted(u, key=lambda use: use.lines) for t, u in targets.items()}
    return dependencies


def strongly_connected_components(nodes, edges):
    """Tarjan's strongly connected components of a directed graph, iteratively."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in nodes:
                    continue
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def shortest_cycle(component, edges):
    """A shortest cycle through the first file of a strongly connected component, as a list of
    files that starts and ends with that file."""
    start = component[0]
    members = set(component)
    came_from = {start: None}
    queue = collections.deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(edges.get(node, ())):
            if successor == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return list(reversed(path)) + [start]
            if successor in members and successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    return component + [start]


def describe_use(use):
    """A use as a report shows it: "name" or "name (through macro_or_inline)"."""
    return use.symbol if use.via is None else "%s (through %s)" % (use.symbol, use.via)


# ---------------------------------------------------------------------------
# The checks; each returns (passed, description, detail lines)
# ---------------------------------------------------------------------------


def check_readme_layers(tree, layers):
    """src/README places every glue file in exactly one layer and names only existing files."""
    glue_names = {s.name for s in tree.glue}
    existing = glue_names | {s.name for s in tree.glue_headers}
    details = []
    placed = collections.Counter(f for _, files in layers for f in files if f.endswith(".c"))
    for name in sorted(glue_names - set(placed)):
        details.append("src/%s is in no layer of src/README's Source files section" % name)
    for name in sorted(n for n, count in placed.items() if count > 1):
        details.append("src/%s is in %d layers of src/README" % (name, placed[name]))
    for _, files in layers:
        for name in files:
            if name not in existing:
                details.append("src/README names src/%s, which does not exist" % name)
    description = "src/README's Source files section places each of the %d glue files in one of its %d layers (%s)" % (
        len(glue_names), len(layers), " < ".join(name for name, _ in layers))
    return not details, description, details


def check_cycles(tree, dependencies):
    """No cycle among the glue files other than the handler."""
    nodes = {s.name for s in tree.glue} - {HANDLER_FILE}
    edges = {f: set(targets) & nodes for f, targets in dependencies.items() if f in nodes}
    details = []
    for component in strongly_connected_components(sorted(nodes), edges):
        if len(component) < 2:
            continue
        details.append("cycle among %s" % " ".join("src/" + f for f in component))
        cycle = shortest_cycle(component, edges)
        for a, b in zip(cycle, cycle[1:]):
            first = dependencies[a][b][0]
            details.append("  src/%s:%d uses %s of src/%s" % (a, first.lines[0], describe_use(first), b))
    edge_count = sum(len(targets) for targets in edges.values())
    description = "no call cycle among the %d glue files other than src/%s (%d file-to-file dependencies)" % (
        len(nodes), HANDLER_FILE, edge_count)
    return not details, description, details


def check_layering(tree, dependencies, layers):
    """No glue file uses a function or variable of a file in a higher layer."""
    layer_of = {}
    for number, (name, files) in enumerate(layers):
        for f in files:
            layer_of.setdefault(f, (number, name))
    definitions = {s.name: s.defines(include_static=False) for s in tree.glue}
    details = []
    for source in sorted(dependencies):
        if source not in layer_of:
            continue  # reported by the README check
        for target, uses in sorted(dependencies[source].items()):
            if target not in layer_of or layer_of[target][0] <= layer_of[source][0]:
                continue
            for use in uses:
                kind = definitions[target][use.symbol][0]
                details.append("src/%s:%s (%s) uses %s %s of src/%s (%s)" % (
                    source, ",".join(str(n) for n in use.lines), layer_of[source][1], kind,
                    describe_use(use), target, layer_of[target][1]))
    description = "glue files use functions and variables of their own or lower layers only (src/README)"
    return not details, description, details


def header_is_allowed(name, quoted, core_names):
    """Whether the core may include header name (quoted: #include "name", else <name>)."""
    if quoted:
        return name in core_names
    return (name in STANDARD_C_HEADERS or name in SYSTEM_HEADERS
            or any(p.match(name) for p in SYSTEM_HEADER_PATTERNS))


def check_core_includes(tree):
    """src/core includes nothing but standard C, system and its own headers."""
    core_files = tree.core + tree.core_headers
    core_names = {s.name for s in core_files}
    details = []
    for source in core_files:
        for number, text in enumerate(source.code_with_literals.split("\n"), 1):
            m = re.match(r"\s*#\s*include\b\s*(.*?)\s*$", text)
            if not m:
                continue
            target = re.match(r'^(<([^>]+)>|"([^"]+)")', m.group(1))
            if not target:
                details.append("%s:%d includes %s, not a header name" % (source.relative, number, m.group(1)))
            elif not header_is_allowed(target.group(2) or target.group(3), target.group(3) is not None, core_names):
                details.append("%s:%d includes %s, which is not a standard C, system or core header" % (
                    source.relative, number, target.group(1)))
    description = "src/core includes no PostgreSQL header: standard C, system and its own only (%d files)" % len(core_files)
    return not details, description, details


def check_sizes(tree, limit):
    """No .c file of src/ or src/core/ over the size limit."""
    files = tree.glue + tree.core
    details = ["%s has %d lines, over the limit of %d" % (s.relative, s.line_count, limit)
               for s in files if s.line_count > limit]
    largest = max(files, key=lambda s: s.line_count) if files else None
    description = "no .c file of src/ or src/core/ is over %d lines (src/README's limit%s)" % (
        limit, "; the largest: %s, %d" % (largest.relative, largest.line_count) if largest else "")
    return not details, description, details


def check_function_comments(tree):
    """Every function definition of src/*.c and src/core/*.c has a comment directly above it."""
    details = []
    count = 0
    for source in tree.glue + tree.core:
        for function in source.functions:
            count += 1
            if not source.comment_above(function.start_line):
                details.append("%s:%d: %s has no comment directly above it" % (
                    source.relative, function.start_line, function.name))
    description = "each of the %d function definitions of src/*.c and src/core/*.c has a comment directly above it" % count
    return not details, description, details


def run_checks(root):
    """Run every check on the tree at root; a list of (rule, passed, description, detail lines),
    the rule one of readme, cycles, layering, includes, sizes, comments."""
    tree = Tree(root)
    dependencies = glue_dependencies(tree)
    results = []
    try:
        section = read_source_files_section(tree)
        layers = read_layers(section)
    except ReadmeError as e:
        section = layers = None
        results.append(("readme", False, "src/README's Source files section gives the glue's layers", [str(e)]))
    if layers is not None:
        results.append(("readme",) + check_readme_layers(tree, layers))
    results.append(("cycles",) + check_cycles(tree, dependencies))
    if layers is not None:
        results.append(("layering",) + check_layering(tree, dependencies, layers))
    results.append(("includes",) + check_core_includes(tree))
    try:
        if section is None:
            raise ReadmeError("no Source files section to read the size limit from")
        results.append(("sizes",) + check_sizes(tree, read_size_limit(section)))
    except ReadmeError as e:
        results.append(("sizes", False, "src/README's Source files section states the size limit", [str(e)]))
    results.append(("comments",) + check_function_comments(tree))
    return results


def print_results(results, prefix=""):
    """Print results as TAP-like lines, each failure followed by its details as "# " lines, every
    line after prefix; return the number of failures."""
    failures = 0
    for number, (_, passed, description, details) in enumerate(results, 1):
        print("%s%s %d - %s" % (prefix, "ok" if passed else "not ok", number, description))
        for line in details:
            print("%s# %s" % (prefix, line))
        failures += not passed
    return failures


# ---------------------------------------------------------------------------
# The self-test
# ---------------------------------------------------------------------------

FIXTURE_README = """\
Fixture
=======


Source files
------------

The core (src/core/, no PostgreSQL).  Size limit: no .c file of src/ or
src/core/ is over 900 lines.

The glue (src/*.c) depends only downward, layer by layer:

  leaves          low.c (helpers; top.c calls them), pair_a.c,
                  pair_b.c (two files that use each other: a cycle),
                  big.c (an oversized file), fixture.h, gone.c
  middle          middle.c
  handler         pmhash.c (the handler)

A paragraph after the table that names ghost.c is no layer.
"""

FIXTURE_FILES = {
    "src/fixture.h": """\
/* The fixture's header: an inline function that calls middle.c. */
extern int	low_value(void);
extern int	middle_value(void);
extern int	middle_other(void);
extern int	low_counter;

/* Reaches middle.c: a file that calls this depends on middle.c. */
static inline int
fixture_inline_middle(void)
{
	return middle_other();
}
""",
    "src/low.c": """\
/* A leaf: defines a variable and functions, some of which break the layering. */
#include "fixture.h"

int			low_counter = 0;
static int	low_private;

/* A helper of the others. */
int
low_value(void)
{
	/* names in comments are no uses: pair_a_value() middle_value() */
	const char *s = "pair_a_value() middle_value()";

	return low_counter + low_private + (s != 0);
}

/* The layering violation: a leaf calling up into the middle layer. */
pg_attribute_unused() int
low_calls_middle(int a pg_attribute_unused(),
				 int b)
{
	return middle_value() + b;
}

/* Calls up too, but through the header's inline function. */
int
low_calls_inline(void)
{
	return fixture_inline_middle();
}

/* A static function of the same name as pair_b.c's: no use of pair_b.c. */
static int
pair_b_value(void)
{
	return 1;
}

/* Uses its own pair_b_value, and a member named like pair_a.c's function. */
int
low_uses_own(struct holder *x)
{
	return pair_b_value() + x->pair_a_value;
}

int
low_without_comment(void)
{
	return 0;
}
""",
    "src/pair_a.c": """\
/* Half of a cycle. */
#include "fixture.h"

extern int	pair_b_value(void);

/* Calls pair_b.c. */
PGDLLEXPORT int
pair_a_value(void)
{
	return pair_b_value() + low_value();
}
""",
    "src/pair_b.c": """\
/* The other half of the cycle. */
#include "fixture.h"

extern int	pair_a_value(void);

/* Calls pair_a.c, closing the cycle. */
int
pair_b_value(void)
{
	return pair_a_value() + low_counter;
}
""",
    "src/middle.c": """\
/* The middle layer. */
#include "fixture.h"

/*
 * Uses nothing of the leaves (a use would close a cycle with low.c's
 * layering violations).
 */
int
middle_value(void)
{
	return 2;
}

/* Reached from low.c through the header's inline function. */
int
middle_other(void)
{
	return 3;
}

/* Calls into the handler, a layer up. */
int
middle_calls_handler(void)
{
	return handler_value();
}
""",
    "src/pmhash.c": """\
/* The handler: uses the other layers, and middle.c uses it; no cycle is reported. */
#include "fixture.h"

/* The handler's own function, called by the middle layer. */
int
handler_value(void)
{
	return middle_value() + low_value() + pair_a_value();
}
""",
    "src/stray.c": """\
/* A file in no layer of the README. */

/* Nothing. */
void
stray(void)
{
}
""",
    "src/core/good.c": """\
/* A core file that includes what it may. */
#include <stdint.h>
#include <sys/types.h>
#include <immintrin.h>
#include "good.h"
/* #include "postgres.h" in a comment is no include */
""",
    "src/core/good.h": """\
/* A core header. */
#include <stddef.h>
""",
    "src/core/bad.c": """\
/* A core file that includes PostgreSQL. */
#include "postgres.h"
#include <utils/rel.h>
#include "../pmhash.h"
""",
}

# What the report on the fixture must say (True) or must not say (False): (rule, what the
# assertion proves, a fragment of the rule's details).
SELF_TEST_EXPECTATIONS = [
    ("readme", True, "a glue file in no layer of src/README is reported",
     "src/stray.c is in no layer"),
    ("readme", True, "a file src/README places in a layer that does not exist is reported",
     "names src/gone.c, which does not exist"),
    ("readme", False, "files named in parenthesized remarks or after the table are no layer's",
     "top.c"),
    ("readme", False, "a file named in a paragraph after the layer table is no layer's", "ghost.c"),
    ("cycles", True, "the call cycle of pair_a.c and pair_b.c is reported with its files",
     "cycle among src/pair_a.c src/pair_b.c\n"),
    ("cycles", True, "the cycle is shown use by use, at the first use (not at an extern declaration)",
     "src/pair_a.c:10 uses pair_b_value of src/pair_b.c\n  src/pair_b.c:10 uses pair_a_value of src/pair_a.c"),
    ("cycles", False, "names in comments, strings and member accesses, and a static function of "
     "the same name, are no uses (else low.c would be in the cycle)", "low.c"),
    ("cycles", False, "the handler src/pmhash.c is in no cycle, although it and middle.c use each other",
     "pmhash.c"),
    ("layering", True, "a leaf calling a function of a higher layer is reported with file:line",
     "src/low.c:22 (leaves) uses function middle_value of src/middle.c (middle)"),
    ("layering", True, "a call up through a header's static inline function is reported",
     "src/low.c:29 (leaves) uses function middle_other (through fixture_inline_middle) of src/middle.c"),
    ("layering", True, "a call into the handler from a lower layer is reported",
     "src/middle.c:25 (middle) uses function handler_value of src/pmhash.c (handler)"),
    ("layering", False, "uses of lower layers, such as the handler's, are no violations", "src/pmhash.c:"),
    ("includes", True, "a core file including postgres.h is reported",
     'src/core/bad.c:2 includes "postgres.h"'),
    ("includes", True, "a core file including a PostgreSQL header in <> is reported",
     "src/core/bad.c:3 includes <utils/rel.h>"),
    ("includes", True, "a core file including a glue header by a relative path is reported",
     'src/core/bad.c:4 includes "../pmhash.h"'),
    ("includes", False, "standard C, system, intrinsics and core headers, and an include in a "
     "comment, pass", "good."),
    ("sizes", True, "a file over the limit src/README states is reported",
     "src/big.c has 901 lines, over the limit of 900"),
    ("comments", True, "a function without a comment directly above it is reported with file:line",
     "src/low.c:46: low_without_comment has no comment"),
    ("comments", False, "multi-line signatures, decorations and block comments count as commented",
     "low_calls_middle"),
    ("comments", False, "each of the oversized file's static functions, commented, passes", "big_"),
]


def write_fixture(root):
    """Write the self-test's source tree under root."""
    files = dict(FIXTURE_FILES)
    files["src/README"] = FIXTURE_README
    big = "/* An oversized file. */\n" + "".join(
        "\n/* Function %d. */\nstatic int\nbig_%d(void)\n{\n\treturn %d;\n}\n" % (i, i, i) for i in range(120))
    files["src/big.c"] = big + "\n" * (901 - big.count("\n"))  # one line over the limit
    for relative, text in files.items():
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def self_test():
    """Check the fixture tree; print its report as comments, then, as TAP-like lines, whether
    each violation was reported and nothing else; return the number of failed assertions."""
    root = tempfile.mkdtemp(prefix="pmhash-structure-")
    try:
        write_fixture(root)
        results = run_checks(root)
    finally:
        shutil.rmtree(root)
    print("# the report on a fixture tree with one deliberate violation of each rule:")
    print_results(results, prefix="#   ")
    reports = collections.defaultdict(lambda: (True, ""))
    for rule, passed, _, details in results:
        reports[rule] = (passed and reports[rule][0], reports[rule][1] + "\n".join(details) + "\n")
    failures = 0
    for number, (rule, must_appear, description, fragment) in enumerate(SELF_TEST_EXPECTATIONS, 1):
        passed, details = reports[rule]
        ok = (not passed and fragment in details) if must_appear else fragment not in details
        print("%s %d - self-test: %s" % ("ok" if ok else "not ok", number, description))
        if not ok:
            print("# expected %s%r in the %s report" % ("" if must_appear else "no ", fragment, rule))
        failures += not ok
    rules_failed = {rule for rule, passed, _, _ in results if not passed}
    every_rule = {"readme", "cycles", "layering", "includes", "sizes", "comments"}
    ok = rules_failed == every_rule
    print("%s %d - self-test: each of the %d checks fails on the fixture" % (
        "ok" if ok else "not ok", len(SELF_TEST_EXPECTATIONS) + 1, len(every_rule)))
    return failures + (not ok)


def main():
    """Parse the arguments, run the checks or the self-test, exit with their status."""
    parser = argparse.ArgumentParser(description="The structural checks of pmhash's source tree.")
    parser.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                        help="the repository to check (default: the one holding this script)")
    parser.add_argument("--self-test", action="store_true",
                        help="check a fixture tree with deliberate violations instead")
    args = parser.parse_args()
    if args.self_test:
        failures = self_test()
    else:
        failures = print_results(run_checks(os.path.abspath(args.root)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
