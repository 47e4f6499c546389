#!/usr/bin/env python3
"""Everyday English word meanings for the demo models, from WordNet 3.0 (Debian's wordnet-base; stdlib only).

The decision data teaches the task; it cannot teach that "end my membership" asks to cancel, or that "return the
extra amount" is a refund: a model trained from scratch knows only the words its templates use. WordNet knows them
all (synonym sets, definitions, usage examples, opposites, "is a kind of"). This script turns its commonly used
senses (those tagged in the SemCor corpus) into two things:

  extract  (here)                 WordNet's data files -> one compact xz TSV of the common senses
  rows     (GPU machine or here)  that TSV -> typed decisions in gen_decisions.py's row format, family "lexicon":
                                  synonyms in context, what a word means in a sentence (other senses of the same word
                                  as distractors), which sentence says the same, reverse dictionary (a definition
                                  -> its word), opposites, "a kind of what", yes/no substitutions; 2-5 options,
                                  the answer at a uniformly drawn letter
  prose()  (imported by train.py) the same senses as plain dictionary sentences for the pretraining corpus

    apt-get install -y --no-install-recommends wordnet-base     # not a project dependency
    python3 scripts/train/lexicon.py extract --out /tmp/lexicon.tsv.xz
    python3 scripts/train/lexicon.py rows --lexicon /tmp/lexicon.tsv.xz --groups 1000 --seed 15 --out /tmp/lex.jsonl

None of this touches the held-out fixtures' templates: the rows have their own wordings, and their evidence is
WordNet's own short examples and definitions.
"""
import argparse
import json
import lzma
import os
import random
import re
import sys

POS_NAME = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb"}


# ------------------------------------------------------------------------------------------------ extract
def _clean_lemma(w):
    return re.sub(r"\((a|p|ip)\)$", "", w).replace("_", " ")


def _split_gloss(g):
    """'pay back; "Please refund me my money"' -> (["pay back"], ["Please refund me my money"])."""
    examples = [e.strip() for e in re.findall(r'"([^"]+)"', g)]
    defs = re.sub(r'"[^"]*"(\s*-+\s*[A-Z][^;]*)?', "", g)
    defs = [d.strip(" ;,:") for d in defs.split(";")]
    return [d for d in defs if d and len(d) > 2], [e for e in examples if 3 <= len(e.split()) <= 25]


def extract(wordnet, out):
    tagged = {}  # (pos, offset) -> lemmas for which this synset is a sense tagged in SemCor
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(wordnet, "index." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith(" "):
                    continue
                fs = line.split()
                pc = int(fs[3])
                rest = fs[4 + pc:]
                for off in rest[2:2 + int(rest[1])]:
                    tagged.setdefault((fs[1], off), []).append(fs[0].replace("_", " "))
    syn = {}  # (pos, offset) -> (pos, lemmas, defs, examples, pointers)
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(wordnet, "data." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith(" "):
                    continue
                head, _, gloss = line.partition(" | ")
                fs = head.split()
                off, ss = fs[0], fs[2]
                p = "a" if ss == "s" else ss
                n = int(fs[3], 16)
                lemmas = [_clean_lemma(fs[4 + 2 * i]) for i in range(n)]
                k = 4 + 2 * n
                pc = int(fs[k])
                ptrs = [(fs[k + 1 + 4 * i], fs[k + 2 + 4 * i], fs[k + 3 + 4 * i], fs[k + 4 + 4 * i]) for i in range(pc)]
                defs, examples = _split_gloss(gloss.strip())
                syn[(p, off)] = (p, lemmas, defs, examples, ptrs)
    lines = []
    for key in sorted(syn, key=lambda k: (k[0], int(k[1]))):
        p, lemmas, defs, examples, ptrs = syn[key]
        tl = tagged.get(key)
        if not tl or not defs:
            continue
        ants, hyps = [], []
        for sym, o, tp, st in ptrs:
            tk = ("a" if tp == "s" else tp, o)
            if tk not in syn:
                continue
            if sym == "!":  # antonym between words: source/target as two hex bytes
                t = int(st[2:], 16)
                words = syn[tk][1]
                if 0 < t <= len(words):
                    ants.append(words[t - 1])
            elif sym in ("@", "@i"):
                hyps.extend(syn[tk][1][:2])
        tl = [next((l for l in lemmas if l.lower() == t), t) for t in dict.fromkeys(tl)]  # the data file's case
        row = [p, "|".join(lemmas), "|".join(tl), "|".join(defs), "|".join(examples),
               "|".join(dict.fromkeys(ants)), "|".join(dict.fromkeys(hyps))]
        lines.append("\t".join(x.replace("\t", " ") for x in row))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    with lzma.open(out, "wb", preset=9) as f:
        f.write(data)
    print("lexicon: %d senses, %.1f MB of text -> %s" % (len(lines), len(data) / 1e6, out), file=sys.stderr)


# ------------------------------------------------------------------------------------------------ reading
class Sense:
    __slots__ = ("pos", "lemmas", "tagged", "defs", "examples", "ants", "hyps")

    def __init__(self, line):
        f = line.rstrip("\n").split("\t")
        sp = lambda s: [x for x in s.split("|") if x]
        self.pos, self.lemmas, self.tagged = f[0], sp(f[1]), sp(f[2])
        self.defs, self.examples, self.ants, self.hyps = sp(f[3]), sp(f[4]), sp(f[5]), sp(f[6])


def load(path):
    with lzma.open(path, "rt", encoding="utf-8") as f:
        return [Sense(l) for l in f if l.strip()]


def prose(senses):
    """Dictionary sentences, 40 senses to a document (documents separated as extract_corpus.py does)."""
    docs, cur = [], []
    for s in senses:
        w = s.tagged[0]
        t = '"%s" (%s): %s.' % (w, POS_NAME[s.pos], "; ".join(s.defs))
        others = [l for l in s.lemmas if l != w]
        if others:
            t += " It means the same as %s." % ", ".join('"%s"' % o for o in others[:4])
        if s.ants:
            t += ' The opposite is "%s".' % s.ants[0]
        if s.hyps:
            t += ' It is a kind of "%s".' % s.hyps[0] if s.pos == "n" else ' It is a way to "%s".' % s.hyps[0] \
                if s.pos == "v" else ""
        for e in s.examples[:2]:
            t += " For example: %s." % e.rstrip(".!?")
        cur.append(t)
        if len(cur) == 40:
            docs.append("\n".join(cur))
            cur = []
    if cur:
        docs.append("\n".join(cur))
    return docs


# ------------------------------------------------------------------------------------------------ rows
Q_SYN = ['Which word could replace "{x}" in the text without changing its meaning?',
         'In the text, "{x}" means about the same as which word?',
         'Pick the closest synonym of "{x}" as it is used here.',
         'Which option is another way of saying "{x}" in this sentence?']
Q_MEAN = ['What does "{x}" mean in the text?', 'Which description fits "{x}" as it is used here?',
          'In this sentence, "{x}" refers to what?', 'Which meaning of "{x}" does the text use?']
Q_SAME = ["Which sentence says the same thing as the text?", "Which option restates the text faithfully?",
          "Which rewording keeps the meaning of the text?"]
Q_REV = ["Which word matches the description in the text?", "Which word is being defined?",
         "What is the text describing?", "Which term fits this definition?"]
Q_OPP = ['Which word means the opposite of "{x}"?', 'What is the opposite of "{x}" as used here?',
         'Which word says the reverse of "{x}"?']
Q_KIND_N = ['In the text, a "{x}" is a kind of what?', 'What general category does "{x}" belong to here?']
Q_KIND_V = ['In the text, to "{x}" is a way to do what?', 'Which more general action includes "{x}"?']
Q_YN = ['Could "{x}" be replaced by "{y}" here without changing the meaning?', 'Does "{x}" mean "{y}" in the text?',
        'Is "{y}" a fair substitute for "{x}" in this sentence?']
Q_YN_OPP = ['Does "{y}" mean the opposite of "{x}"?', 'Is "{y}" the reverse of "{x}"?']


def _contains(text, w):
    return re.search(r"(?i)(?<![\w-])%s(?![\w-])" % re.escape(w), text) is not None


def _replace(text, w, r):
    def sub(m):
        return r[0].upper() + r[1:] if m.group(0)[0].isupper() else r
    return re.sub(r"(?i)(?<![\w-])%s(?![\w-])" % re.escape(w), sub, text, count=1)


class Gen:
    def __init__(self, senses, rng):
        self.s, self.rng = senses, rng
        self.by_pos = {}
        self.by_word = {}
        for i, s in enumerate(senses):
            self.by_pos.setdefault(s.pos, []).append(i)
            for w in s.tagged:
                self.by_word.setdefault(w.lower(), []).append(i)

    def words_unlike(self, s, k, pos=None):
        """k words of other senses of the same part of speech that are not words of s, nor related to it."""
        bad = {w.lower() for w in s.lemmas + s.ants + s.hyps}
        out, pool = [], self.by_pos[pos or s.pos]
        while len(out) < k:
            o = self.s[pool[self.rng.randrange(len(pool))]]
            w = o.tagged[0]
            if w.lower() not in bad and w not in out and not (set(o.lemmas) & set(s.lemmas)):
                out.append(w)
        return out

    def defs_unlike(self, s, x, k):
        """k definitions of other senses: the same word's other senses first (which sense is meant), then others."""
        out = []
        for j in self.by_word.get(x.lower(), []):
            o = self.s[j]
            if o is not s and o.defs[0] != s.defs[0] and o.defs[0] not in out:
                out.append(o.defs[0])
        self.rng.shuffle(out)
        out = out[:k]
        pool = self.by_pos[s.pos]
        while len(out) < k:
            o = self.s[pool[self.rng.randrange(len(pool))]]
            if o is not s and o.defs[0] not in out and not (set(o.lemmas) & set(s.lemmas)):
                out.append(o.defs[0])
        return out

    def row(self, gid, q, right, wrong):
        opts = [right] + wrong
        n = len(opts)
        order = list(range(1, n))
        self.rng.shuffle(order)
        at = self.rng.randrange(n)
        order.insert(at, 0)
        options = [{"id": "o%d" % i, "description": opts[i]} for i in order]
        return {"id": "%s-%d" % (gid, self.rng.randrange(1 << 30)), "family": "lexicon", "question": q,
                "options": options, "answer": "o0"}

    def yes_no(self, gid, q, yes):
        opts = [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]
        if self.rng.random() < 0.5:
            opts.reverse()
        return {"id": "%s-%d" % (gid, self.rng.randrange(1 << 30)), "family": "lexicon", "question": q,
                "options": opts, "answer": "yes" if yes else "no"}

    def group(self, gid):
        rng = self.rng
        s = self.s[rng.randrange(len(self.s))]
        x = s.tagged[rng.randrange(len(s.tagged))]
        syns = [l for l in s.lemmas if l.lower() != x.lower()]
        ex = [e for e in s.examples if _contains(e, x)]
        nopt = lambda: rng.randint(2, 5)
        rows = []
        if ex and rng.random() < 0.75:  # a usage example: the word in context
            ev = ex[rng.randrange(len(ex))]
            ev = ev[0].upper() + ev[1:]
            if ev[-1] not in ".!?":
                ev += "."
            if syns:
                y = syns[rng.randrange(len(syns))]
                rows.append(self.row(gid, rng.choice(Q_SYN).format(x=x), y, self.words_unlike(s, nopt() - 1)))
                z = y if rng.random() < 0.5 else self.words_unlike(s, 1)[0]
                rows.append(self.yes_no(gid, rng.choice(Q_YN).format(x=x, y=z), z == y))
                if rng.random() < 0.6:
                    rows.append(self.row(gid, rng.choice(Q_SAME), _replace(ev, x, y),
                                         [_replace(ev, x, w) for w in self.words_unlike(s, nopt() - 1)]))
            rows.append(self.row(gid, rng.choice(Q_MEAN).format(x=x), s.defs[0], self.defs_unlike(s, x, nopt() - 1)))
            if s.ants:
                a = s.ants[0]
                rows.append(self.row(gid, rng.choice(Q_OPP).format(x=x), a, self.words_unlike(s, nopt() - 1)))
                if rng.random() < 0.5:
                    z = a if rng.random() < 0.5 else (syns[0] if syns and rng.random() < 0.5 else
                                                      self.words_unlike(s, 1)[0])
                    rows.append(self.yes_no(gid, rng.choice(Q_YN_OPP).format(x=x, y=z), z == a))
            if s.hyps and s.pos in "nv":
                q = rng.choice(Q_KIND_N if s.pos == "n" else Q_KIND_V).format(x=x)
                rows.append(self.row(gid, q, s.hyps[0], self.words_unlike(s, nopt() - 1)))
        else:  # a definition: which word it defines
            ev = "; ".join(s.defs)
            ev = ev[0].upper() + ev[1:] + "."
            rows.append(self.row(gid, rng.choice(Q_REV), x, self.words_unlike(s, nopt() - 1)))
            if syns and rng.random() < 0.5:
                y = syns[rng.randrange(len(syns))]
                rows.append(self.row(gid, "Which other word also fits this description?", y,
                                     self.words_unlike(s, nopt() - 1)))
        rng.shuffle(rows)
        for r in rows[:4]:
            r["evidence"] = ev
        return rows[:4]


def rows(lexicon, groups, seed, out):
    senses = load(lexicon)
    g = Gen(senses, random.Random("%s-lexicon" % seed))
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        for i in range(groups):
            for r in g.group("lex%d" % i):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
                n += 1
    print("lexicon rows: %d in %d groups -> %s" % (n, groups, out), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract", help="WordNet -> compact xz TSV of common senses")
    e.add_argument("--wordnet", default="/usr/share/wordnet")
    e.add_argument("--out", required=True)
    r = sub.add_parser("rows", help="typed decisions about word meanings (family lexicon)")
    r.add_argument("--lexicon", required=True)
    r.add_argument("--groups", type=int, required=True)
    r.add_argument("--seed", default="15")
    r.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.cmd == "extract":
        extract(a.wordnet, a.out)
    else:
        rows(a.lexicon, a.groups, a.seed, a.out)


if __name__ == "__main__":
    sys.exit(main())
