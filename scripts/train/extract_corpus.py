#!/usr/bin/env python3
"""Extract English prose from Debian documentation packages into one plain-text pretraining corpus.

Runs here (no GPU, stdlib only). Install the packages first (they are NOT build or test dependencies):

    apt-get install -y --no-install-recommends python3-doc debian-reference-en linux-doc-6.1 \
        debian-handbook developers-reference maint-guide bash-doc
    python3 scripts/train/extract_corpus.py --out /tmp/corpus.txt.xz [--max-mb 120]

Sources, in this order: the Python 3.11 documentation (reST sources), the Linux kernel documentation (reST and
text), the Debian Reference, the Debian Administrator's Handbook (en-US HTML), the Developer's Reference, the
New Maintainers' Guide, bash's documentation and the installed manual pages (sections 1, 5, 7, 8; troff
stripped). Markup is removed, and only paragraphs that read as prose are kept: at least 8 words, mostly
letters, few code symbols, ASCII/Latin text. Documents are separated by a blank line and a form feed line.
The output is deterministic (files are visited in sorted order) and is written xz-compressed.
"""
import argparse
import glob
import gzip
import html
import lzma
import os
import re
import sys

SOURCES = [
    ("python-doc", "/usr/share/doc/python3.11/html/_sources/**/*.rst.txt", "rst"),
    ("linux-doc", "/usr/share/doc/linux-doc-6.1/Documentation/**/*.rst.gz", "rst"),
    ("linux-doc", "/usr/share/doc/linux-doc-6.1/Documentation/**/*.txt.gz", "rst"),
    ("debian-reference", "/usr/share/debian-reference/*.en.html", "html"),
    ("debian-handbook", "/usr/share/doc/debian-handbook/html/en-US/*.html", "html"),
    ("developers-reference", "/usr/share/developers-reference/_sources/*.rst.txt", "rst"),
    ("maint-guide", "/usr/share/doc/maint-guide/html/*.en.html", "html"),
    ("bash-doc", "/usr/share/doc/bash/*.html", "html"),
    ("manpages", "/usr/share/man/man[1578]/*.gz", "man"),
]


def read(path):
    op = gzip.open if path.endswith(".gz") else open
    try:
        with op(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def from_html(s):
    s = re.sub(r"(?is)<(script|style|pre|code|head)\b.*?</\1>", "\n\n", s)
    s = re.sub(r"(?i)<(p|div|br|li|h[1-6]|tr|dt|dd|table|ul|ol|section)\b[^>]*>", "\n\n", s)
    s = re.sub(r"(?s)<[^>]+>", " ", s)
    return html.unescape(s)


def from_rst(s):
    out = []
    skip_indent = None
    for line in s.split("\n"):
        if skip_indent is not None:  # inside a literal/code block: skip indented lines
            if line.strip() == "" or line.startswith(" ") or line.startswith("\t"):
                continue
            skip_indent = None
        st = line.strip()
        if st.startswith(".. ") or st.endswith("::"):
            if st.endswith("::") and not st.startswith(".."):
                out.append(st[:-1] if st[:-2].rstrip() else "")
            skip_indent = True
            continue
        if re.fullmatch(r"[=\-~^*#+`'\"._:]{3,}", st):
            out.append("")
            continue
        out.append(line)
    s = "\n".join(out)
    s = re.sub(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", s)   # :role:`text <target>`
    s = re.sub(r"`([^`<]*?)\s*<[^>]*>`_+", r"\1", s)                   # `text <url>`_
    s = re.sub(r"``([^`]*)``", r"\1", s)
    s = re.sub(r"`([^`]*)`_*", r"\1", s)
    s = re.sub(r"\*\*([^*]*)\*\*|\*([^*]*)\*", lambda m: m.group(1) or m.group(2) or "", s)
    return s


def from_man(s):
    out = []
    for line in s.split("\n"):
        if line.startswith((".\\\"", "'\\\"")):
            continue
        if line.startswith("."):
            m = re.match(r"\.(B|I|BI|BR|IR|RB|RI|IB|SM|SB)\s+(.*)", line)
            if m:
                out.append(m.group(2).replace('"', ""))
            elif re.match(r"\.(PP|LP|P|SH|SS|TP|IP|sp|br)\b", line):
                out.append("")
            continue
        out.append(line)
    s = "\n".join(out)
    s = re.sub(r"\\f[BIRPC]|\\f\([A-Z]{2}|\\s[-+]?\d", "", s)
    s = s.replace("\\-", "-").replace("\\(em", "-").replace("\\(en", "-").replace("\\e", "\\").replace("\\&", "")
    s = re.sub(r"\\\(..|\\\*.|\\\[[a-z]+\]", "", s)
    return s


WORD = re.compile(r"[A-Za-z][a-z']+")


def prose(par):
    """A paragraph worth keeping: English-looking sentences, not code or tables."""
    p = " ".join(par.split())
    if len(p) < 60 or len(p) > 4000:
        return None
    words = p.split(" ")
    if len(words) < 8:
        return None
    letters = sum(c.isalpha() for c in p)
    if letters < 0.72 * len(p):
        return None
    if sum(c in "{}[]<>=|\\$#@_;" for c in p) > 0.02 * len(p):
        return None
    if sum(1 for w in words if WORD.fullmatch(w.strip(".,;:()!?\"'"))) < 0.6 * len(words):
        return None
    if not re.search(r"\b(the|is|are|to|of|and|a|in)\b", p):
        return None
    if any(ord(c) > 0x24F and not (0x2000 <= ord(c) <= 0x206F) for c in p):
        return None
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-mb", type=float, default=120.0, help="stop after this many MB of text")
    a = ap.parse_args()
    total, per = 0, {}
    seen = set()
    limit = int(a.max_mb * 1e6)
    with lzma.open(a.out, "wt", encoding="utf-8", preset=9) as out:
        for name, pattern, kind in SOURCES:
            for path in sorted(glob.glob(pattern, recursive=True)):
                raw = read(path)
                text = from_html(raw) if kind == "html" else from_rst(raw) if kind == "rst" else from_man(raw)
                pars = []
                for par in re.split(r"\n\s*\n", text):
                    p = prose(par)
                    if p and hash(p) not in seen:
                        seen.add(hash(p))
                        pars.append(p)
                if not pars:
                    continue
                doc = "\n\n".join(pars) + "\n\n\f\n\n"
                if total + len(doc) > limit:
                    break
                out.write(doc)
                total += len(doc)
                per[name] = per.get(name, 0) + len(doc)
            if total >= limit * 0.999:
                break
    for k, v in per.items():
        print("%-22s %8.1f MB" % (k, v / 1e6))
    print("total %.1f MB of text -> %s (%.1f MB xz)" % (total / 1e6, a.out, os.path.getsize(a.out) / 1e6))


if __name__ == "__main__":
    sys.exit(main())
