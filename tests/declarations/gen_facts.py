#!/usr/bin/env python3
"""Reads h5gds's own declarations (python/native/decl) and writes what
tests/declarations/ compares with real headers:

  facts.h   one line per checkable fact, for both translation units:
              H5GDS_FACT_SIZE(type)            sizeof
              H5GDS_FACT_OFFSET(type, member)  offsetof and the member's size
              H5GDS_FACT_VALUE(name)           an enum constant or #define
              H5GDS_FACT_POINTER(name)         a #define of pointer type
              H5GDS_FACT_LIST(name)            a braced list (#define)
              H5GDS_FACT_GLOBAL(name, global)  a macro naming HDF5's global id
  types.h   for the real headers' unit only: each typedef redeclared as a
            variable of both the real and the declared type (C rejects the
            pair when they differ), and a guard that no declared function is
            a macro there (a redeclaration would then check another name).

The declarations' format (hdf5.h's header comment) keeps this parser small.
"""
import argparse
import re
import sys
from pathlib import Path

# Not compared: the API level the declarations claim, and statement macros.
NOT_COMPARED = {"H5_VERS_MAJOR", "H5_VERS_MINOR", "H5_VERS_RELEASE", "H5E_BEGIN_TRY", "H5E_END_TRY"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return text.replace("\\\n", " ")


def split_statements(text):
    """The statements of `text` ended by a ';' at brace depth 0 (a nested
    struct or union stays inside its statement), stripped."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == ";" and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    return [s for s in out if s]


def top_level_statements(text):
    """Statements at brace depth 0, preprocessor lines removed."""
    body = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    return [" ".join(s.split()) for s in split_statements(body)]


def members(body):
    """Member names of a struct body (nested unions count as one member)."""
    names = []
    for decl in split_statements(body):
        m = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", decl)
        if m:
            names.append(m.group(1))
            continue
        decl = re.sub(r"\[[^\]]*\]", "", decl)
        names.append(re.findall(r"\w+", decl.split("}")[-1])[-1])
    return names


def enum_constants(body):
    return [re.match(r"\s*(\w+)", item).group(1) for item in body.split(",") if item.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--facts", required=True)
    ap.add_argument("--types", required=True)
    ap.add_argument("headers", nargs="+")
    args = ap.parse_args()

    facts, types, pointer_types = [], [], set()
    functions = []
    for path in map(Path, args.headers):
        text = strip_comments(path.read_text())
        is_functions = path.name.endswith("_functions.h")
        statements = top_level_statements(text)
        if is_functions:
            for s in statements:
                m = re.search(r"\(\s*\*?\s*(\w+)\s*\)\s*\(|(\w+)\s*\(", s) if "(" in s else None
                name = (m.group(1) or m.group(2)) if m else re.findall(r"\w+", s)[-1]
                functions.append(name)
            continue
        for s in statements:
            m = re.match(r"typedef (struct|union|enum) (\w+ )?\{(.*)\} (\w+)$", s)
            if m:
                kind, tag, body, name = m.group(1), (m.group(2) or "").strip(), m.group(3), m.group(4)
                if tag:
                    types.append((name, f"{kind} {tag}"))
                if kind == "enum":
                    facts.append(f"H5GDS_FACT_SIZE({name})")
                    facts += [f"H5GDS_FACT_VALUE({c})" for c in enum_constants(body)]
                else:
                    facts.append(f"H5GDS_FACT_SIZE({name})")
                    facts += [f"H5GDS_FACT_OFFSET({name}, {mem})" for mem in members(body)]
                continue
            m = re.match(r"(struct|union|enum) (\w+) \{(.*)\}$", s)
            if m:
                kind, tag, body = m.groups()
                if kind == "enum":
                    facts += [f"H5GDS_FACT_VALUE({c})" for c in enum_constants(body)]
                else:
                    facts.append(f"H5GDS_FACT_SIZE({kind} {tag})")
                    facts += [f"H5GDS_FACT_OFFSET({kind} {tag}, {mem})" for mem in members(body)]
                continue
            m = re.match(r"typedef (.*\(\s*\*\s*)(\w+)(\s*\).*)$", s)
            if m:  # function pointer
                types.append((m.group(2), m.group(1) + "%s" + m.group(3)))
                continue
            m = re.match(r"typedef (.*?)(\w+)$", s)
            if m:
                declared, name = m.group(1).strip(), m.group(2)
                types.append((name, declared + " %s"))
                if declared.endswith("*"):
                    pointer_types.add(name)
                elif not declared.startswith(("struct", "union", "enum")):
                    facts.append(f"H5GDS_FACT_SIZE({name})")
                continue
            print(f"gen_facts.py: {path}: cannot read: {s}", file=sys.stderr)
            return 1
        for m in re.finditer(r"^[ \t]*#define (\w+)([ \t(])[ \t]*(.*)$", text, flags=re.M):
            name, sep, value = m.group(1), m.group(2), m.group(3).strip()
            if sep == "(" or not value or name.startswith("H5GDS_") or name in NOT_COMPARED:
                continue
            g = re.match(r"H5GDS_DECL_GLOBAL_ID\((\w+)\)$", value)
            if g:
                facts.append(f'H5GDS_FACT_GLOBAL({name}, "{g.group(1)}")')
            elif value.startswith("{"):
                facts.append(f"H5GDS_FACT_LIST({name})")
            elif re.match(r"\(\((\w+)\)", value) and re.match(r"\(\((\w+)\)", value).group(1) in pointer_types:
                facts.append(f"H5GDS_FACT_POINTER({name})")
            else:
                facts.append(f"H5GDS_FACT_VALUE({name})")

    Path(args.facts).write_text("/* Generated by tests/declarations/gen_facts.py. */\n" + "\n".join(facts) + "\n")
    lines = ["/* Generated by tests/declarations/gen_facts.py. */"]
    for name, declared in types:
        var = f"h5gds_decl_type_{name}"
        decl = declared % var if "%s" in declared else f"{declared} {var}"
        lines += [f"extern {name} {var};", f"extern {decl};"]
    for name in functions:
        lines += [f"#ifdef {name}", f'#error "{name} is a macro in these headers: its declaration cannot be checked"',
                  "#endif"]
    Path(args.types).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
