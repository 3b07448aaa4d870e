#!/usr/bin/env python3
"""Find `use` cycles between the files of each Rust crate.

Layering only holds if imports point one way: when a.rs uses b.rs and b.rs
uses a.rs, neither can be read (or changed) without the other. For each
crate this builds a graph whose nodes are files and whose edges are the
module references in code:

  * `use crate::...`, `use super::...`, `use self::...` and `use child::...`
    (child: a module declared in the same file), `pub use` included;
  * paths in code: `crate::x::y`, `super::x`, `self::x::y`, `child::x`;
  * a name reached through a re-export is followed to the file that defines
    it (`use crate::Error` where lib.rs says `pub use error::Error` points at
    error.rs, not lib.rs).

A parent declaring `mod child;` is not an edge; a child naming `super::` is
an edge to the parent's file. `foo.rs` with `foo/bar.rs` (or `foo/mod.rs`)
is the module `foo` and its child `bar`. Comments, string literals and
`#[cfg(test)]` items (the usual `mod tests { use super::*; }`) are ignored.

Usage: check-use-cycles.py [CRATE_SRC_DIR ...]   (default: src drivers/*/src)
       check-use-cycles.py --self-test
Prints each cycle as a list of files and exits 1 if there is any; else
prints "no use cycles in N files of M crates" and exits 0.
Python 3 standard library only.
"""
import os
import re
import sys
import tempfile
from collections import deque
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


# ------------------------------------------------------------- lexing

def strip_source(text):
    """Blank out comments, string and char literals (keeping offsets and
    newlines), so that what remains is code."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c in "rb" and re.match(r"(?:br|r)#*\"", text[i:i + 260]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            m = re.match(r"(?:br|r)(#*)\"", text[i:])
            end = text.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F}') or a lifetime ('a).
            m = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]*\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:i + 12])
            if m:
                blank(i, i + m.end())
                i += m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def match_brace(code, open_at):
    """Index just past the `}` matching the `{` at `open_at`."""
    depth = 0
    for k in range(open_at, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k + 1
    return len(code)


def item_end(code, start):
    """End of the item starting at `start`: its `;` or its balanced block."""
    k = start
    while k < len(code):
        if code[k] == ";":
            return k + 1
        if code[k] == "{":
            return match_brace(code, k)
        k += 1
    return len(code)


CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
ATTR = re.compile(r"\s*#\s*\[")


def drop_cfg_test(code):
    """Blank out every item carrying #[cfg(test)]; return the code and the
    names of out-of-line test modules (`#[cfg(test)] mod tests;`)."""
    skipped = set()
    while True:
        m = CFG_TEST.search(code)
        if not m:
            return code, skipped
        k = m.end()
        while True:  # further attributes on the same item
            a = ATTR.match(code, k)
            if not a:
                break
            depth, k = 0, a.end() - 1
            while k < len(code):
                depth += code[k] == "["
                depth -= code[k] == "]"
                k += 1
                if depth == 0:
                    break
        end = item_end(code, k)
        mm = re.match(r"\s*(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", code[k:end])
        if mm:
            skipped.add(mm.group(1))
        code = code[:m.start()] + re.sub(r"[^\n]", " ", code[m.start():end]) + code[end:]


# ------------------------------------------------------------- use trees

def split_top(s, sep=","):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def expand_use(tree, prefix=()):
    """`a::{b, c::d as e, f::*}` -> [(segments, alias or None or '*')]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    tree = re.sub(r"\s*::\s*", "::", tree)
    if tree.startswith("::"):
        tree = tree[2:]
    out = []
    brace = tree.find("{")
    if brace >= 0 and tree.endswith("}"):
        head = tree[:brace].rstrip(":")
        segs = prefix + tuple(s for s in head.split("::") if s)
        for sub in split_top(tree[brace + 1:-1]):
            out.extend(expand_use(sub, segs))
        return out
    alias = None
    m = re.match(r"(.*?) as (" + IDENT + r")$", tree)
    if m:
        tree, alias = m.group(1), m.group(2)
    segs = prefix + tuple(s for s in tree.split("::") if s)
    if segs and segs[-1] == "*":
        return [(segs[:-1], "*")]
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    if not segs:
        return []
    return [(segs, alias or segs[-1])]


# ------------------------------------------------------------- crates

USE_RE = re.compile(r"(?<![\w$])(?:pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]+);")
MOD_DECL = re.compile(r"(?<![\w$])(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])")
PATH_ATTR = re.compile(r"#\s*\[\s*path\s*=\s*\"([^\"]+)\"\s*\]\s*$")
DEF_RE = re.compile(r"(?<![\w$])(?:struct|enum|fn|const|static|type|trait|union|macro_rules\s*!)\s+(" + IDENT + ")")
CODE_PATH = re.compile(r"(?<![\w:$])\$?(" + IDENT + r")((?:\s*::\s*" + IDENT + r")+)")


class Module:
    def __init__(self, path, file, span):
        self.path = path          # tuple of names from the crate root
        self.file = file          # the file holding it
        self.span = span          # (start, end) of its body in that file
        self.uses = []            # (segments, alias-or-'*')
        self.defs = set()
        self.children = set()


class Crate:
    def __init__(self, root_file):
        self.root_file = root_file
        self.modules = {}         # path tuple -> Module
        self.files = {}           # file -> (code, file module path)
        self.load(root_file, (), root_file.parent)

    def load(self, file, mpath, mod_dir):
        raw = file.read_text(encoding="utf-8", errors="replace")
        code, test_mods = drop_cfg_test(strip_source(raw))
        self.files[file] = (code, mpath)
        self.scan(file, code, mpath, mod_dir, 0, len(code), test_mods)

    def scan(self, file, code, mpath, mod_dir, start, end, test_mods):
        """Record module `mpath` (body code[start:end]) and its children."""
        mod = self.modules[mpath] = Module(mpath, file, (start, end))
        inner = []  # inline child spans, excluded from this module's scan
        k = start
        while True:
            m = MOD_DECL.search(code, k, end)
            if not m:
                break
            name = m.group(1)
            mod.children.add(name)
            if m.group(2) == "{":
                close = match_brace(code, m.end() - 1)
                inner.append((m.end(), close - 1))
                self.scan(file, code, mpath + (name,), mod_dir / name, m.end(), close - 1, set())
                k = close
                continue
            k = m.end()
            if name in test_mods:
                mod.children.discard(name)
                continue
            pa = PATH_ATTR.search(code[max(start, m.start() - 300):m.start()].rstrip())
            cands = [mod_dir / pa.group(1)] if pa else [mod_dir / (name + ".rs"), mod_dir / name / "mod.rs"]
            child = next((c for c in cands if c.is_file()), None)
            if child is None:
                continue
            sub_dir = child.parent if child.name == "mod.rs" else child.parent / child.stem
            self.load(child, mpath + (name,), sub_dir)
        own = " ".join(code[a:b] for a, b in self._pieces(start, end, inner))
        for um in USE_RE.finditer(own):
            mod.uses.extend(expand_use(um.group(1)))
        mod.defs.update(DEF_RE.findall(own))
        mod.defs.update(mod.children)

    @staticmethod
    def _pieces(start, end, inner):
        pos = start
        for s, e in sorted(inner):
            yield pos, s
            pos = e
        yield pos, end

    def module_at(self, file, pos):
        """The innermost module of `file` whose body holds offset `pos`."""
        best = None
        for m in self.modules.values():
            if m.file == file and m.span[0] <= pos <= m.span[1]:
                if best is None or len(m.path) > len(best.path):
                    best = m
        return best

    def anchor(self, segs, here):
        """Turn a path's leading `crate`/`super`/`self`/child into an absolute
        module path and the remaining segments; None for external paths."""
        segs = list(segs)
        if segs[0] in ("crate", "$crate"):
            return (), segs[1:]
        if segs[0] in ("super", "self"):
            base = list(here)
            while segs and segs[0] in ("super", "self"):
                if segs.pop(0) == "super":
                    if not base:
                        return None
                    base.pop()
            return tuple(base), segs
        if segs[0] in self.modules[here].children:
            return here + (segs[0],), segs[1:]
        return None

    def resolve(self, segs, here, seen=None):
        """The module path a path points into, following re-exports."""
        a = self.anchor(segs, here)
        if a is None:
            return None
        cur, rest = a
        while rest and cur + (rest[0],) in self.modules:
            cur = cur + (rest[0],)
            rest = rest[1:]
        if not rest:
            return cur
        return self.find_name(cur, rest[0], seen or set())

    def find_name(self, mpath, name, seen):
        """Where module `mpath` gets `name` from: itself, or a `use` of it."""
        if (mpath, name) in seen:
            return mpath
        seen.add((mpath, name))
        mod = self.modules[mpath]
        if name in mod.defs:
            return mpath
        for segs, alias in mod.uses:
            if alias == name:
                target = self.resolve(segs, mpath, seen)
                return target if target is not None else mpath
        for segs, alias in mod.uses:
            if alias == "*":
                target = self.resolve(segs, mpath, seen)
                if target is not None and target != mpath:
                    found = self.find_name(target, name, seen)
                    if found != target or name in self.modules[target].defs:
                        return found
        return mpath

    def edges(self):
        graph = {f: set() for f in self.files}
        for file, (code, _) in self.files.items():
            def add(segs, pos):
                here = self.module_at(file, pos).path
                target = self.resolve(segs, here)
                if target is not None:
                    t = self.modules[target].file
                    if t != file:
                        graph[file].add(t)
            for um in USE_RE.finditer(code):
                for segs, _alias in expand_use(um.group(1)):
                    add(segs, um.start())
            # Paths inside use trees were seen above (relative to their prefix).
            bare = USE_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
            for cm in CODE_PATH.finditer(bare):
                segs = [cm.group(1)] + [s.strip() for s in cm.group(2).split("::") if s.strip()]
                if cm.group(0).startswith("$"):
                    segs[0] = "$" + segs[0]
                add(segs, cm.start())
        return graph


# ------------------------------------------------------------- cycles

def sccs(graph):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def shortest_cycle(graph, start, members):
    """Shortest cycle through `start` inside one component, as a node list."""
    prev, q = {start: None}, deque([start])
    while q:
        v = q.popleft()
        for w in sorted(graph[v]):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1]
            if w not in prev:
                prev[w] = v
                q.append(w)
    return None


def cycles(graph):
    """One shortest cycle through each file that is on any, deduplicated."""
    found, seen = [], set()
    for comp in sccs(graph):
        if len(comp) < 2:
            continue
        members = set(comp)
        for f in comp:
            c = shortest_cycle(graph, f, members)
            if not c:
                continue
            i = c.index(min(c))
            key = tuple(c[i:] + c[:i])
            if key not in seen:
                seen.add(key)
                found.append(list(key))
    return found


# ------------------------------------------------------------- driver

def crate_roots(src):
    src = Path(src)
    if not (src / "lib.rs").is_file() and not (src / "main.rs").is_file() and (src / "src").is_dir():
        src = src / "src"
    return [src / r for r in ("lib.rs", "main.rs") if (src / r).is_file()]


def check(paths, out=sys.stdout):
    """Report cycles of the crates under `paths`; the list of cycles found."""
    found, nfiles, ncrates = [], set(), 0
    for p in paths:
        roots = crate_roots(p)
        if not roots:
            print(f"{p}: no lib.rs or main.rs here", file=sys.stderr)
            sys.exit(2)
        for root in roots:
            crate = Crate(root)
            ncrates += 1
            nfiles.update(crate.files)
            graph = crate.edges()
            for c in cycles(graph):
                files = [os.path.relpath(f) for f in c]
                print(f"use cycle: {' -> '.join(files + files[:1])}", file=out)
                found.append([Path(f).resolve() for f in c])
    if not found:
        print(f"no use cycles in {len(nfiles)} files of {ncrates} crates", file=out)
    return found


def self_test():
    cases = {
        # name: ({file: text}, expected cycles as sets of file names)
        "acyclic, re-export followed, test module and comments ignored": ({
            "lib.rs": "mod a;\nmod b;\nmod error;\npub use a::A;\npub use error::Error;\n",
            "error.rs": "pub enum Error { X }\n",
            "a.rs": "use crate::b::B;\nuse crate::Error;\npub struct A(B);\n"
                    "fn f() -> Result<(), crate::Error> { Ok(()) }\n",
            "b.rs": "// use crate::a::A;\n/* crate::a::A */\nconst S: &str = \"crate::a::A\";\n"
                    "pub struct B;\nfn g<'a>(x: &'a str) -> char { 'x' }\n"
                    "#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::a::A;\n"
                    "    fn t() { let _ = crate::a::A(B); }\n}\n",
        }, []),
        "two files using each other": ({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "pub struct B;\nfn f() { let _ = super::a::A; }\n",
        }, [{"a.rs", "b.rs"}]),
        "child using super:: while the parent re-exports it": ({
            "lib.rs": "mod child;\npub use child::X;\npub struct Y;\n",
            "child.rs": "use super::Y;\npub struct X(Y);\n",
        }, [{"lib.rs", "child.rs"}]),
        "mod declaration alone is no edge": ({
            "lib.rs": "pub mod child;\npub struct Y;\n",
            "child.rs": "use super::Y;\npub struct X(Y);\n",
        }, []),
        "foo.rs + foo/bar.rs, and mod.rs": ({
            "lib.rs": "mod foo;\nmod m;\n",
            "foo.rs": "mod bar;\npub struct F;\nfn f() { bar::g(); }\n",
            "foo/bar.rs": "use super::F;\npub fn g() {}\n",
            "m/mod.rs": "mod leaf;\npub use self::leaf::L;\n",
            "m/leaf.rs": "pub struct L;\n",
        }, [{"foo.rs", "foo/bar.rs"}]),
        "three-file ring through a glob": ({
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::b::*;\npub struct A;\n",
            "b.rs": "pub use crate::c::C as B;\n",
            "c.rs": "pub struct C;\nfn f() { crate::a::A; }\n",
        }, [{"a.rs", "b.rs", "c.rs"}]),
    }
    failed = 0
    for name, (files, expected) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / "src"
            for rel, text in files.items():
                (src / rel).parent.mkdir(parents=True, exist_ok=True)
                (src / rel).write_text(text)
            sink = open(os.devnull, "w")
            got = check([str(src)], out=sink)
            sink.close()
            got_sets = sorted(sorted(str(f.relative_to(src.resolve())) for f in c) for c in got)
            want = sorted(sorted(c) for c in expected)
            ok = got_sets == want
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": got {got_sets}, want {want}"))
    print("self-test passed" if not failed else f"self-test: {failed} case(s) failed")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if any(a.startswith("-") for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    paths = argv[1:]
    if not paths:
        repo = Path(__file__).resolve().parent.parent
        paths = [str(p) for p in [repo / "src", *sorted(repo.glob("drivers/*/src"))] if p.is_dir()]
    return 1 if check(paths) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
