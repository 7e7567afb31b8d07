"""Edge-case texts for tokenizer parity with the real Gemma tokenizer (at least 200).

Grouped by what they probe; every group is a place where a reimplementation of SigLIP 2's
tokenization (lowercasing, special tokens, EOS, truncation, byte fallback) can drift from
the reference. Deterministic: no randomness, so a failure names the same text every run.
"""

from __future__ import annotations

SPECIAL_STRINGS = ["<eos>", "<pad>", "<bos>", "<unk>", "<mask>"]

EMPTY_AND_WHITESPACE = [
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "   \t\n  ",
    " a",
    "a ",
    "  leading and trailing  ",
    "multiple     inner      spaces",
    "\u00a0non-breaking\u00a0space",
    "\u2003em space\u2002en space",
    "\u3000ideographic space",
    "zero\u200bwidth\u200bspace",
    "\ufeffbyte order mark",
    "line\u2028separator\u2029paragraph",
    " " * 100,
    "\n" * 70,
]

CASE = [
    "A Photo Of A CAT",
    "A PHOTO OF A CAT",
    "a photo of a cat",
    "aPhOtO oF a CaT",
    "NASA JPEG HTML URL",
    "iPhone McDonald's O'Neill",
    "CamelCaseWordsTogether",
    "ÉCOLE Über STRASSE",
    "ǅemal ǈubljana ǋ titlecase digraphs",
    "ẞ capital sharp s, Straße",
    "ÀÉÎÕÜ àéîõü",
]

ACCENTS = [
    "Café Crème BRÛLÉE, naïve façade",
    "e\u0301 combining acute vs é precomposed",
    "n\u0303 vs ñ, a\u030a vs å",
    "Å Ω K: Angstrom, Ohm, Kelvin signs \u212b \u2126 \u212a",
    "ﬁ ﬂ ligatures ﬃ",
    "Ⅻ roman numeral ⅻ",
    "① ② ③ circled",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
    "Ｈｅｌｌｏ ＷＯＲＬＤ",
    "Ærøskøbing Ø æ",
    "Łódź Żółć",
    "Dvořák Čech Ř",
    "Nguyễn Thị Minh Khai",
]

GREEK = [
    "ΟΔΟΣ",
    "ΣΊΣΥΦΟΣ",
    "ΣΟΦΟΣ ΣΟΦΟΣ.",
    "Σ",
    "ΑΣ",
    "ΑΣ.",
    "ΑΣ'Α",
    "ΌΣΟΣ ΌΣΟΙ",
    "λόγος Λόγος ΛΌΓΟΣ",
    "μῆνιν ἄειδε θεὰ",
    "Ἀθῆναι ᾼ ᾈ iota subscript",
]

TURKISH_AND_CASE_EXPANSION = [
    "İstanbul",
    "İSTANBUL ıstanbul",
    "DİYARBAKIR Iğdır",
    "i̇ dotted i with combining dot",
    "ŉ ǰ ΐ ΰ expanding lowercase",
    "Ϊ́ Ϋ́",
    "ﬀ ﬅ ﬆ",
]

CJK = [
    "一只猫的照片",
    "東京の夜景の写真",
    "고양이 사진",
    "ねこ いぬ カタカナ ﾊﾝｶｸ",
    "我爱北京天安门",
    "漢字とひらがなと한글",
    "𠀀𠀁𪚥 rare CJK extension B",
    "々〆〤 iteration marks",
    "「引用」『二重』【括弧】",
    "中文，标点。符号！",
]

RTL = [
    "صورة قطة على الطاولة",
    "תמונה של חתול",
    "mixed RTL صورة and LTR text",
    "\u200fright-to-left mark\u200e left-to-right mark",
    "\u202aLRE\u202b RLE \u202c PDF \u202e RLO override",
    "مرحبا بالعالم ١٢٣ ٤٥٦",
    "שָׁלוֹם with niqqud",
    "ﷺ ﷽ Arabic ligatures",
    "فارسی: گربه",
    "اردو: بلی",
]

EMOJI = [
    "🐱🚀 emoji 👩‍👩‍👧 ZWJ family 🇯🇵",
    "🐱",
    "👍🏽 skin tone",
    "🏳️‍🌈 rainbow flag",
    "👨‍💻 technologist",
    "❤️ vs ❤ variation selector",
    "🇺🇸🇬🇧🇫🇷 flags",
    "🧑‍🤝‍🧑 people holding hands",
    "1️⃣ keycap #️⃣",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿 tag sequence",
    "😀😃😄😁😆😅😂🤣",
    "\u200d lone zero width joiner \u200d",
    "a\ufe0fb variation selector alone",
]

CONTROL = [
    "control\x00chars\x07and\x1bescape\x7f",
    "tab\tseparated\tand\nnew\r\nlines",
    "\x00",
    "\x01\x02\x03\x04",
    "bell\x07",
    "del\x7f",
    "c1 controls \x80\x85\x9f",
    "form\x0cfeed\x0bvertical tab",
    "\x1b[31mANSI red\x1b[0m",
    "soft\u00adhyphen",
    "word\u2060joiner",
    "replacement \ufffd char",
    "noncharacter \ufdd0 \uffff",
]

METASPACE_AND_BYTES = [
    "▁",
    "▁▁",
    "a▁b",
    " ▁ ",
    "▁leading metaspace",
    "trailing metaspace▁",
    "▁" * 70,
    "<0x41>",
    "<0xFF> byte token string",
    "private use \ue000\uf8ff",
    "plane 15 private \U000f0000 and \U0010fffd",
    "math 𝐀𝐁𝐂 𝔸𝔹ℂ 𝒜",
    "ancient 𓀀 hieroglyph, 𐌰 gothic",
    "musical 𝄞 clef",
    "ⓐⓑⓒ Ⓐ",
    "\u0300 leading combining grave",
    "a\u0300\u0301\u0302\u0303\u0304 stacked combining",
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇ zalgo",
    "ቀ Ethiopic ᐁ Canadian ᚠ runic",
    "ກ Lao ཀ Tibetan ꦄ Javanese",
    "हिन्दी देवनागरी",
    "தமிழ் বাংলা ગુજરાતી",
    "ไทย ภาษาไทย",
    "Русский ТЕКСТ Ёё",
    "Ελληνικά Кириллица Latin",
]

PUNCTUATION_AND_NUMBERS = [
    "punctuation!!! ??? ... (brackets) [more] {braces} \"quotes\" 'single'",
    "numbers 0123456789 3.14159 1,000,000",
    "this is a photo of a dog.",
    "https://example.com/path?q=1&x=2#frag",
    "user@example.com",
    "C:\\Windows\\path and /usr/bin/env",
    "<html><body>tags</body></html>",
    "<s> </s> <|endoftext|> [CLS] [SEP] other models' specials",
    "<start_of_turn>user\nhi<end_of_turn>",
    "<eos",
    "eos>",
    "< eos >",
    "<<eos>>",
    "<EOS> <PAD> <BOS>",
    "<Eos>",
    "&lt;eos&gt;",
    "\\<eos\\>",
    "$100 €50 £20 ¥1000 ₹",
    "½ ¼ ¾ ² ³",
    "——–-‐ dashes … ellipsis",
    "“curly” ‘quotes’ «guillemets» „low“",
    "#hashtag @mention",
    "2026-12-01T08:00:00Z",
    "+1 (555) 123-4567",
    "a" * 3,
    "!!!",
    "...",
]


def special_token_texts() -> list[str]:
    """Each special-token string alone, at each position, repeated, glued, with case."""
    texts: list[str] = []
    for tok in SPECIAL_STRINGS:
        texts += [
            tok,
            f"a {tok} b",
            f"{tok}x",
            f"x{tok}",
            f"a photo of a cat{tok}",
            f"{tok} a photo of a cat",
            f"{tok}{tok}",
            f"{tok} {tok} {tok}",
            f" {tok} ",
            f"A PHOTO {tok.upper()} CAT",
        ]
    texts += ["".join(SPECIAL_STRINGS), " ".join(SPECIAL_STRINGS), "<pad>" * 70]
    return texts


def long_texts() -> list[str]:
    """Past 64 tokens: truncation to 63 content tokens, EOS kept; the long-text window."""
    sentence = "a red block and a robot arm on the kitchen table"
    return [
        " ".join([sentence] * 12),
        "supercalifragilisticexpialidocious" * 8,
        "x" * 500,
        "🐱" * 80,
        "a " * 62,
        "a " * 63,
        "a " * 64,
        "word " * 200,
        "一只猫的照片" * 40,
        "Α Β Γ Δ ΣΣΣ " * 30,
        sentence.upper() * 30,
        "<eos> " * 100,
        "x" * 300 + "<eos>",
        "ab" * 3000,
        " ".join(str(i) for i in range(2000)),
        "🇯🇵" * 50 + " end",
        "e\u0301" * 200,
        "\x00" * 100,
    ]


def edge_texts() -> list[str]:
    """Every group, in order, without duplicates."""
    groups = [
        EMPTY_AND_WHITESPACE,
        CASE,
        ACCENTS,
        GREEK,
        TURKISH_AND_CASE_EXPANSION,
        CJK,
        RTL,
        EMOJI,
        CONTROL,
        METASPACE_AND_BYTES,
        PUNCTUATION_AND_NUMBERS,
        special_token_texts(),
        long_texts(),
    ]
    seen: dict[str, None] = {}
    for group in groups:
        for text in group:
            seen.setdefault(text, None)
    return list(seen)
