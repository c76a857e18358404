"""Seeded corpus for the pre-tokenizer's Unicode classes (tests/tokenizer/data/unicode_golden.jsonl),
weighted to what host regex libraries get wrong: characters added in Unicode 15.0-17.0, new emoji
sequences (ZWJ, skin tones, flags, tag sequences, keycaps), every block of the code space (each 128-code-
point window holding an assigned character) and whitespace runs of every White_Space character.

Needs unicodedata2 (pinned in requirements.txt, Unicode 16.0) and the interpreter's own unicodedata
(Python 3.11: Unicode 14.0) to find the characters added in 15.0-16.0.
"""

import random
import unicodedata

import unicodedata2

# Assigned in Unicode 17.0 (unassigned in 16.0): from the UCD 17.0 diff (unicodedata2 17.0.0 vs 16.0.0).
# HF's Oniguruma (Unicode 16) and our tables both see them as unassigned (Cn); the test pins that.
U17_RANGES = [
    (0x88F, 0x88F), (0xC5C, 0xC5C), (0xCDC, 0xCDC), (0x1ACF, 0x1ADD), (0x1AE0, 0x1AEB), (0x20C1, 0x20C1),
    (0x2B96, 0x2B96), (0xA7CE, 0xA7CF), (0xA7D2, 0xA7D2), (0xA7D4, 0xA7D4), (0xA7F1, 0xA7F1),
    (0xFBC3, 0xFBD2), (0xFD90, 0xFD91), (0xFDC8, 0xFDCE), (0x10940, 0x10959), (0x10EC5, 0x10EC7),
    (0x10ED0, 0x10ED8), (0x10EFA, 0x10EFB), (0x11B60, 0x11B67), (0x11DB0, 0x11DDB), (0x11DE0, 0x11DE9),
    (0x16EA0, 0x16EB8), (0x16EBB, 0x16ED3), (0x16FF2, 0x16FF6), (0x187F8, 0x187FF), (0x18D09, 0x18D1E),
    (0x18D80, 0x18DF2), (0x1CCFA, 0x1CCFC), (0x1CEBA, 0x1CED0), (0x1CEE0, 0x1CEF0), (0x1E6C0, 0x1E6DE),
    (0x1E6E0, 0x1E6F5), (0x1E6FE, 0x1E6FF), (0x1F6D8, 0x1F6D8), (0x1F777, 0x1F77A), (0x1F8D0, 0x1F8D8),
    (0x1FA54, 0x1FA57), (0x1FA8A, 0x1FA8A), (0x1FA8E, 0x1FA8E), (0x1FAC8, 0x1FAC8), (0x1FACD, 0x1FACD),
    (0x1FAEA, 0x1FAEA), (0x1FAEF, 0x1FAEF), (0x1FBFA, 0x1FBFA), (0x2B73A, 0x2B73F), (0x2CEA2, 0x2CEAD),
    (0x323B0, 0x33479),
]

WHITE_SPACE = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680"] + \
    [chr(c) for c in range(0x2000, 0x200B)] + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
NOT_SPACE_LOOKALIKES = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u180e", "\u00ad"]

CONTEXTS = ["{c}", " {c}", "a{c}b", "{c}{c}{c}", "1{c}2", "x {c}!", "{c}\n", "'{c}", "«{c}»", "中{c}文",
            "か{c}ア", "{c} ", "  {c}  ", "\t{c}", ".{c}abc", "{c}123", "({c})", "é{c}\u0301", "{c}\r\n\r\n",
            "-{c}-", "The {c} word", "{c}’s", "#{c}", "{c}\u200d{c}", "{c}\ufe0f"]

SKIN = [chr(c) for c in range(0x1F3FB, 0x1F400)]
ZWJ = "\u200d"
PEOPLE = ["\U0001F468", "\U0001F469", "\U0001F9D1", "\U0001F466", "\U0001F467", "\U0001F9D2"]
ROLES = ["\U0001F4BB", "\U0001F52C", "\U0001F680", "\U0001F692", "\u2695\ufe0f", "\U0001F9AF", "\U0001F37C",
         "\U0001F9BD", "\U0001F33E", "\U0001F373", "\U0001F3A8", "\U0001F527"]
# Unicode 15.1 / 16.0 RGI ZWJ sequences: head shaking, phoenix, lime, brown mushroom, broken chain,
# family adult/child, facing right; 16.0 emoji such as face with bags under eyes, fingerprint, harp.
NEW_SEQS = ["\U0001F642\u200d\u2194\ufe0f", "\U0001F642\u200d\u2195\ufe0f", "\U0001F426\u200d\U0001F525",
            "\U0001F34B\u200d\U0001F7E9", "\U0001F344\u200d\U0001F7EB", "\u26d3\ufe0f\u200d\U0001F4A5",
            "\U0001F9D1\u200d\U0001F9D1\u200d\U0001F9D2", "\U0001F9D1\u200d\U0001F9D2\u200d\U0001F9D2",
            "\U0001F3C3\u200d\u27a1\ufe0f", "\U0001F6B6\U0001F3FD\u200d\u27a1\ufe0f",
            "\U0001F9D1\U0001F3FF\u200d\U0001F9BD\u200d\u27a1\ufe0f", "\U0001FAE9", "\U0001FAC6", "\U0001FABE",
            "\U0001FADC", "\U0001FA89", "\U0001FA8F", "\U0001FAE8", "\U0001FA75", "\U0001FABF", "\U0001FAAD"]
TAG_FLAGS = ["\U0001F3F4" + "".join(chr(0xE0000 + ord(c)) for c in t) + "\U000E007F"
             for t in ("gbeng", "gbsct", "gbwls", "usca", "ustx")]


def is_new_15_16(cp):
    ch = chr(cp)
    return unicodedata2.category(ch) != "Cn" and unicodedata.category(ch) == "Cn"


def emoji_sequence(rng):
    kind = rng.randrange(8)
    if kind == 0:  # ZWJ profession with optional skin tone
        p = rng.choice(PEOPLE) + (rng.choice(SKIN) if rng.random() < 0.6 else "")
        return p + ZWJ + rng.choice(ROLES)
    if kind == 1:  # families
        return ZWJ.join(rng.choice(PEOPLE) for _ in range(rng.randint(2, 4)))
    if kind == 2:  # couples with two skin tones
        return "\U0001F9D1" + rng.choice(SKIN) + ZWJ + "\u2764\ufe0f" + ZWJ + "\U0001F48B" + ZWJ + \
            "\U0001F9D1" + rng.choice(SKIN)
    if kind == 3:  # regional indicator pairs, valid or not, several in a row
        return "".join(chr(0x1F1E6 + rng.randrange(26)) + chr(0x1F1E6 + rng.randrange(26))
                       for _ in range(rng.randint(1, 4)))
    if kind == 4:
        return rng.choice(TAG_FLAGS)
    if kind == 5:  # keycaps
        return rng.choice("0123456789#*") + "\ufe0f\u20e3"
    if kind == 6:
        return rng.choice(NEW_SEQS)
    # hand with a skin tone, or a new pictograph with a modifier / VS16
    return rng.choice(["\U0001F44B", "\U0001FAF7", "\U0001FAF8", "\U0001F90C"]) + rng.choice(SKIN + ["\ufe0f", ""])


def build_unicode_corpus(seed=1517):
    rng = random.Random(seed)
    out = []
    assigned = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
                and unicodedata2.category(chr(cp)) not in ("Cn", "Cs")]
    new16 = [cp for cp in assigned if is_new_15_16(cp)]
    new17 = [cp for a, b in U17_RANGES for cp in range(a, b + 1)]
    assert len(new16) > 10000, len(new16)

    # Characters added in 15.0-16.0, each context at least once, categories mixed.
    for i in range(1800):
        c = chr(rng.choice(new16))
        out.append(("unicode15_16", CONTEXTS[i % len(CONTEXTS)].format(c=c)))
    # Characters added in 17.0 (unassigned for both sides).
    for i in range(500):
        c = chr(rng.choice(new17))
        out.append(("unicode17", CONTEXTS[i % len(CONTEXTS)].format(c=c)))
    # Runs mixing new characters with old letters, marks, digits, punctuation and spaces.
    pool_old = [chr(cp) for cp in rng.sample(assigned, 4000)]
    for _ in range(700):
        parts = []
        for _ in range(rng.randint(2, 14)):
            r = rng.random()
            if r < 0.45:
                parts.append(chr(rng.choice(new16)))
            elif r < 0.55:
                parts.append(chr(rng.choice(new17)))
            elif r < 0.75:
                parts.append(rng.choice(pool_old))
            elif r < 0.85:
                parts.append(rng.choice(WHITE_SPACE + [" ", " ", " "]))
            else:
                parts.append(rng.choice("abcXYZ0123456789.,;!?-'\"()[]{}<>/\\|_*&^%$#@~`+=:"))
        out.append(("unicode15_17_mix", "".join(parts)))
    # Emoji sequences alone, repeated, in text.
    for i in range(800):
        seq = "".join(emoji_sequence(rng) for _ in range(rng.randint(1, 3)))
        out.append(("emoji_sequence", [seq, " " + seq, "hi " + seq + "!", seq + seq, "x" + seq + "y\n"][i % 5]))
    # Every block: each 128-code-point window with an assigned character, sampled twice.
    windows = {}
    for cp in assigned:
        windows.setdefault(cp >> 7, []).append(cp)
    for w in sorted(windows):
        cps = windows[w]
        k = rng.randint(1, 8)
        s = "".join(chr(rng.choice(cps)) for _ in range(k))
        out.append(("block", rng.choice(["{}", " {}", "{} {}", "a{}", "{}1"]).replace("{}", s)))
    # Whitespace runs: every White_Space character, mixed runs, around letters, newlines, lookalikes.
    for i in range(600):
        run = "".join(rng.choice(WHITE_SPACE) for _ in range(rng.randint(1, 12)))
        if i % 4 == 1:
            run += rng.choice(NOT_SPACE_LOOKALIKES)
        word = rng.choice(["word", "字", chr(rng.choice(new16)), "1", "!", "", "\U0001FAE8"])
        out.append(("whitespace_run", [run, word + run, run + word, word + run + word][i % 4]))
    return out
