"""Deterministic tokenizer test corpus (seeded): the strings the C++ tokenizer must encode exactly like
Hugging Face `tokenizers`. Each entry is (category, bytes). Most entries are valid UTF-8; the
`malformed_utf8` category is deliberately broken.

Categories and rough counts are listed in docs/tokenizer.md.
"""

import random

PROSE_WORDS = (
    "the of and to in is was for that with as on by at from his her it an were are which this be or has "
    "had not but they you their one all we can been more there when who will would its so may also said "
    "after some what other into than then over only new first could time these two people years state world "
    "government between because through during before while however although machine learning inference "
    "engine throughput latency tokenizer attention weights quantization memory bandwidth kernel scheduler "
    "Monday January Paris London Beijing Tokyo Mr. Dr. U.S. don't can't it's we're I'll they've o'clock"
).split()

PROSE = [
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse...",
    "She said, \"I'll be there at 5:30 p.m.\"; he replied: 'Don't be late!'",
    "Prices rose 3.5% in Q3 2024 (vs. 2.1% in Q2), according to the U.S. Bureau of Labor Statistics.",
    "E-mail john.doe@example.com or visit https://example.org/path?q=1&lang=en#frag for details.",
    "Café naïve résumé coöperate façade jalapeño Ångström Øresund Straße Œuvre",
    "In 1969, Apollo 11 landed on the Moon; Neil Armstrong's first words were famous.",
    "Well... I don't know?! Maybe -- maybe not; (who knows) [really] {seriously} <html>",
    "   Leading spaces and trailing spaces   ",
    "Tabs\tbetween\twords\tand\ttrailing\t",
    "Line one\nLine two\r\nLine three\rLine four\n\n\nLine after blank lines",
]

CODE = [
    'def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
    'import numpy as np\nx = np.arange(10_000).reshape(100, 100)\nprint(x.T @ x)\n',
    '#include <vector>\nint main() {\n    std::vector<int> v{1, 2, 3};\n    for (auto& x : v) x *= 2;\n    return 0;\n}\n',
    'template <typename T>\nconstexpr T clamp(T v, T lo, T hi) noexcept { return v < lo ? lo : (hi < v ? hi : v); }\n',
    'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
    'const f = async (url) => {\n  const r = await fetch(url);\n  return r.ok ? r.json() : null;\n};\n',
    'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello, 世界")\n}\n',
    'SELECT u.id, COUNT(*) AS n FROM users u JOIN orders o ON o.user_id = u.id WHERE o.total > 100 GROUP BY u.id;\n',
    '#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l "$f" | awk \'{print $1}\'\ndone\n',
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>T</title></head>\n<body><p class="x">Hi</p></body>\n</html>\n',
    '{"name": "deepinfer", "version": "0.1.0", "deps": {"pcre2": ">=10.42"}, "list": [1, 2.5, null, true]}\n',
    'public class Main {\n    public static void main(String[] args) {\n        System.out.println("Hi " + args.length);\n    }\n}\n',
    'local function map(t, f)\n  local r = {}\n  for i, v in ipairs(t) do r[i] = f(v) end\n  return r\nend\n',
    '    x += 1;;\n\t\t}\n\n\n// TODO(someone): fix this!!!\n/* block\n * comment */\n',
    'matrix = [[1, 2, 3],\n          [4, 5, 6]]\nassert all(len(r) == 3 for r in matrix), "bad"\n',
    '$ cat /etc/hosts | grep -E "^127\\.0\\.0\\.1" && echo ok || echo fail\n',
    'diff --git a/x.c b/x.c\n@@ -1,3 +1,4 @@\n-int a;\n+int a = 0;\n+int b;\n',
    '\\begin{equation} E = mc^2 \\quad \\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2} \\end{equation}\n',
]

CJK = [
    "我是中国人，我爱我的祖国。今天天气很好！",
    "深度求索发布了新的大语言模型，支持一百万上下文长度。",
    "日本語のテキストです。ひらがなとカタカナと漢字が混ざっています。",
    "東京タワーは１９５８年に完成しました。",
    "한국어 문장입니다. 안녕하세요, 만나서 반갑습니다!",
    "繁體中文：這是一個測試句子，包含標點符號「引號」與『雙引號』。",
    "鋆鋈𠀀𠀁𪚥𰀀 — rare and extension-B/G ideographs",
    "ｆｕｌｌｗｉｄｔｈ　ＡＳＣＩＩ　１２３　！？",
    "半角ｶﾀｶﾅ と 全角カタカナ",
    "中文English混合text，数字123和symbols#@!",
]

OTHER_SCRIPTS = [
    "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣٤٥ وعلامات ترقيم؟",
    "اللُّغَةُ العَرَبِيَّةُ جَمِيلَةٌ",
    "नमस्ते दुनिया! यह हिंदी पाठ है। क्षत्रिय, ज्ञान, श्री, द्विवेदी",
    "हिन्दी में संख्याएँ: ०१२३४५६७८९",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "שלום עולם! זה טקסט בעברית.",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "বাংলা ভাষা, தமிழ் மொழி, తెలుగు భాష, ગુજરાતી",
    "Tiếng Việt có dấu: Nguyễn Văn A đã đến Hà Nội.",
    "Ελληνικά και ᾠδὴ ᾍδης with polytonic marks",
    "Zalgo: Z̸̢̛a̷̡͝l̵̨̛g̶̢͠o̴̡͘ t̵̡̛e̷̢͝x̶̨̛t̴̢͘",
    "ምሳሌ ጽሑፍ በአማርኛ። ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ",
]

EMOJI = [
    "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍💻", "🇺🇸🇯🇵🇨🇳", "1️⃣#️⃣*️⃣", "❤️‍🔥", "👩‍❤️‍💋‍👨",
    "🫠🫶🪿", "😀😃😄😁😆😅🤣😂", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "☺︎ vs ☺️", "🐈‍⬛", "🧔‍♀️", "👁️‍🗨️",
]

SPECIAL_LOOKALIKES = [
    "<｜User｜>hello<｜Assistant｜>", "<|User|>hello<|Assistant|>", "<｜begin▁of▁sentence｜>",
    "<｜begin_of_sentence｜>", "<｜begin▁of▁sentence|>", "<｜end▁of▁sentence｜><｜end▁of▁sentence｜>",
    "<think>reasoning</think>answer", "<think >x</ think>", "<<think>>", "<thinking>", "</think></think>",
    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    "<|DSML|tool_calls>", "｜DSML｜｜DSML｜", "｜DSML", "DSML｜", "<dsml:x>", "</dsml:y>", "<dsml", "< dsml:",
    "<｜latest_reminder｜>", "<｜action｜><｜query｜><｜title｜>", "<｜User｜", "｜User｜>", "<｜▁pad▁｜>",
    "<｜fim▁hole｜><｜fim▁begin｜><｜fim▁end｜>", "<|EOT|>", "<|EOT|", "<｜/table>｜<｜table｜>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>", "<tool_result>ok</tool_result>",
    "<｜place▁holder▁no▁0｜>", "<｜place▁holder▁no▁99｜>", "<｜place▁holder▁no▁999｜>",
]

WHITESPACE = [
    " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n ", "\t \t", "\u00a0", "\u3000", "\u2003\u2009",
    "\u0085", "\u2028\u2029", "\u200b\u200c\u200d", "\ufeff", "\x0b\x0c", " \r\n\t ",
]

DIGITS = [
    "0", "12", "123", "1234", "12345", "123456789012345678901234567890", "3.14159265358979",
    "1,000,000", "-42", "+1e-10", "0x1F2E3D", "٠١٢٣٤٥٦٧٨٩", "０１２３４５", "²³¹⁴", "①②③", "Ⅻ", "𝟘𝟙𝟚",
    "2024-01-31T12:34:56Z", "192.168.0.1:8080", "v1.2.3-rc.4",
]

SYMBOLS = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~«»‹›„“”‘’–—…•·×÷±§¶©®™°€£¥₹₽¢∞≈≠≤≥∑∏√∫∂∆∇∈∉⊂⊃∧∨¬→←↑↓⇒⇔"


def _rand_codepoint(rng):
    ranges = [
        (0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
        (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x23FF), (0x2500, 0x27BF),
        (0x3000, 0x30FF), (0x4E00, 0x9FA5), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1F64F),
        (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF), (0x0, 0x1F), (0x300, 0x36F),
    ]
    lo, hi = rng.choice(ranges)
    return chr(rng.randint(lo, hi))


def _mix(rng, pools, n):
    parts = []
    for _ in range(n):
        pool = rng.choice(pools)
        parts.append(rng.choice(pool))
    seps = ["", " ", "  ", "\n", "\t", ", ", ". ", "\r\n", " \n"]
    out = ""
    for p in parts:
        out += p + rng.choice(seps)
    return out


def _sentence(rng):
    n = rng.randint(3, 25)
    words = [rng.choice(PROSE_WORDS) for _ in range(n)]
    if rng.random() < 0.5:
        words[0] = words[0].capitalize()
    s = " ".join(words)
    return s + rng.choice([".", "!", "?", "...", ";", ":", ",", ""])


def _malformed(rng, base):
    b = bytearray(base.encode("utf-8"))
    for _ in range(rng.randint(1, 4)):
        op = rng.randint(0, 4)
        pos = rng.randint(0, len(b)) if b else 0
        if op == 0 and b:  # truncate a multi-byte sequence somewhere
            del b[pos:pos + 1]
        elif op == 1:  # stray continuation byte
            b[pos:pos] = bytes([rng.randint(0x80, 0xBF)])
        elif op == 2:  # invalid lead bytes / overlongs / surrogates
            b[pos:pos] = rng.choice([b"\xff", b"\xfe", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
                                     b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xc3", b"\xe2\x82",
                                     b"\xf0\x9f\x98"])
        elif op == 3:
            b[pos:pos] = bytes([rng.randint(0, 255) for _ in range(rng.randint(1, 6))])
        else:  # end mid-character
            b += rng.choice([b"\xe4\xb8", b"\xf0\x9f", b"\xc2"])
    return bytes(b)


def build_corpus(seed=20260401):
    rng = random.Random(seed)
    out = []

    def add(cat, s):
        out.append((cat, s.encode("utf-8") if isinstance(s, str) else s))

    for s in PROSE:
        add("prose", s)
    for _ in range(500):
        add("prose", " ".join(_sentence(rng) for _ in range(rng.randint(1, 6))))
    for s in CODE:
        add("code", s)
    for _ in range(300):
        a = rng.choice(CODE)
        b = rng.choice(CODE)
        ident = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_ABCXYZ0123456789") for _ in range(rng.randint(1, 24)))
        cut = rng.randint(0, len(a))
        add("code", a[:cut] + ident + "  " * rng.randint(0, 6) + b[rng.randint(0, len(b)):])
    for s in CJK:
        add("cjk", s)
    for _ in range(300):
        add("cjk", _mix(rng, [CJK, [c for c in CJK[0]], [c for c in CJK[2]], ["ですか", "。", "，", "、"]],
                        rng.randint(1, 12)))
    for s in OTHER_SCRIPTS:
        add("scripts", s)
    for _ in range(300):
        add("scripts", _mix(rng, [OTHER_SCRIPTS, [w for s in OTHER_SCRIPTS for w in s.split()]], rng.randint(1, 10)))
    for s in EMOJI:
        add("emoji", s)
    for _ in range(200):
        add("emoji", _mix(rng, [EMOJI, PROSE_WORDS, ["!", "?", " "]], rng.randint(1, 10)))
    for s in DIGITS:
        add("digits", s)
    for _ in range(200):
        n = rng.randint(1, 80)
        d = "".join(rng.choice("0123456789") for _ in range(n))
        add("digits", rng.choice(["", "x", " ", "$", "-", "a"]) + d + rng.choice(["", " ", "px", ".5", "%", "号"]))
    for s in WHITESPACE:
        add("whitespace", s)
    for _ in range(200):
        ws = "".join(rng.choice(WHITESPACE) * rng.randint(1, 5) for _ in range(rng.randint(1, 6)))
        add("whitespace", rng.choice(["", "a", "word", "中", "!"]) + ws + rng.choice(["", "b", "end", "文", "?"]))
    for s in SPECIAL_LOOKALIKES:
        add("special", s)
    for _ in range(300):
        add("special", _mix(rng, [SPECIAL_LOOKALIKES, PROSE_WORDS, CJK, ["<", ">", "｜", "|", "▁"]],
                            rng.randint(1, 8)))
    for _ in range(300):
        add("mixed", _mix(rng, [PROSE_WORDS, CJK, OTHER_SCRIPTS, EMOJI, DIGITS, WHITESPACE, list(SYMBOLS),
                                SPECIAL_LOOKALIKES, CODE], rng.randint(1, 15)))
    for _ in range(150):
        add("symbols", "".join(rng.choice(SYMBOLS + " abc\n") for _ in range(rng.randint(1, 40))))
    for _ in range(250):
        add("random_unicode", "".join(_rand_codepoint(rng) for _ in range(rng.randint(1, 40))))
    pools = [PROSE, CODE, CJK, OTHER_SCRIPTS, EMOJI, SPECIAL_LOOKALIKES]
    for _ in range(250):
        add("malformed_utf8", _malformed(rng, rng.choice(rng.choice(pools))))
    add("edge", "")
    add("edge", "a" * 3000)
    add("edge", " " * 500)
    add("edge", "\n" * 300)
    add("edge", "9" * 1000)
    add("edge", "中" * 800)
    add("edge", "👍" * 200)
    return out
