#!/usr/bin/env python3
"""Reference cases for qmm's tokenizer from Hugging Face `tokenizers` (the definition).

usage: tokenizer_cases.py TOKENIZER_JSON OUT_CASES OUT_BENCH_TEXT [OUT_CHAT_CASES]

Writes OUT_CASES, one case per line: hex(input bytes) TAB ids (space-separated) TAB
hex(expected decode). Valid UTF-8 inputs: ids are tokenizers' ids and the expected decode is
tokenizers' decode. Inputs with invalid UTF-8: qmm's rule (include/qmm_text.h) - each invalid
byte is its own byte token, the valid runs between are encoded alone - built from tokenizers' ids
of each run. Also writes a benchmark text and prints tokenizers' single-thread encode speed on it.

OUT_CHAT_CASES: conversations rendered with tokenizer_config.json's Jinja chat template (as
transformers renders it: sandboxed, trim_blocks, lstrip_blocks), one per line: add_generation_prompt,
enable_thinking, then hex(role) hex(content) pairs, then hex(expected text), tab-separated.
"""
import os
import random
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402


def byte_token_ids(tok):
    """The id of each single byte's ByteLevel token."""
    cps, n = [], 0
    for b in range(256):
        printable = (33 <= b <= 126) or (0xA1 <= b <= 0xAC) or b >= 0xAE
        cps.append(b if printable else 256 + n)
        n += 0 if printable else 1
    return [tok.token_to_id(chr(c)) for c in cps]


def expected(tok, byte_ids, data):
    text = data.decode("utf-8", errors="surrogateescape")
    ids, dec, run = [], b"", ""

    def flush():
        nonlocal ids, dec, run
        if run:
            r = tok.encode(run, add_special_tokens=False).ids
            ids += r
            dec += tok.decode(r, skip_special_tokens=False).encode("utf-8")
            run = ""

    for ch in text:
        if 0xDC80 <= ord(ch) <= 0xDCFF:  # an invalid byte
            flush()
            ids.append(byte_ids[ord(ch) - 0xDC00])
            dec += bytes([ord(ch) - 0xDC00])
        else:
            run += ch
    flush()
    return ids, dec


def cases(rng):
    fixed = [
        "", "Hello, world!", "hello world", " leading space", "trailing space ", "  two  spaces  ",
        "I'm sure they'll say it's fine, we've done 'em", "DON'T SHOUT, I'LL", "'s 'S 'ſ",
        "12345678901234567890", "3.14159 + 2.71828 = 5.85987", "version 1.2.3-rc4",
        "tab\there", "line\nbreak", "crlf\r\nline", "\n\n\n", "a\n\n b", "   \n   \n",
        " " * 200, "\t" * 50, "x" + " " * 17 + "y", "a" * 500, "ab" * 300,
        "你好，世界！这是一个测试。", "日本語のテキストとカタカナ、ひらがな", "한국어 텍스트입니다",
        "Привет, мир! Ёлка", "Ελληνικά κείμενα", "مرحبا بالعالم", "שלום עולם", "हिन्दी पाठ",
        "ภาษาไทย", "emoji 😀😃😄 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽", "flags 🇫🇷🇩🇪🇯🇵",
        "e\u0301 a\u0300 o\u0308 n\u0303 (combining)", "\u212b \u2126 \u00c5 (compat/NFC)",
        "\uac00\u11a8 hangul jamo \u1100\u1161\u11a8", "ﬁ ﬂ ① ² ℌ", "\u200b\u200c\u200d zero width",
        "\u00a0nbsp\u00a0\u2003em\u3000ideographic", "\u2028\u2029\u0085 separators",
        "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; i++) { a[i] += b[i]; }",
        "<div class=\"x\">&amp;</div>", "SELECT * FROM t WHERE id = 42;", "https://example.com/a?b=c&d=e",
        "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "$$\\frac{a}{b}$$ \\alpha_1^2",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "text<|endoftext|>more",
        "<think>\nreasoning\n</think>\n\nanswer", "<|im_start|><|im_end|><|im_start|>",
        "<|im_start", "<|im_end|x", "<tool_call>{}</tool_call>", "a<|endoftext|>", "<|endoftext|>",
        "!!!???...,,,;;;", "---===+++", "'''\"\"\"```", "~~~***&&&", "1a2b3c", "a1b2c3",
        "ǅungla ǈ ǋ", "İstanbul ıi", "straße STRASSE", "\x00null\x00byte", "\x01\x02\x1f\x7f",
    ]
    out = [s.encode("utf-8") for s in fixed]
    # invalid UTF-8
    out += [b"\xff", b"abc\xffdef", b"\xc3", b"caf\xc3", b"\xe2\x82", b"x\xe2\x82y",
            b"\xed\xa0\x80 surrogate", b"\xc0\xaf overlong", b"\xf4\x90\x80\x80 too big",
            b"\x80\x80\x80", b"ok \xfe\xfe then \xf0\x9f\x98 broken emoji", b"  \xff  ",
            b"<|im_start|>\xff<|im_end|>", b"\xe4\xbd\xa0\xe5\xa5"]
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789", " \t\n\r", ".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`",
        "你好世界中文字符测试的一是不了人我在有他这为之大来以个", "あいうえおカキクケコ漢字",
        "äöüßéèêàçñøåæœ", "αβγδεζηθ", "абвгдежз", "😀🎉🚀❤️👍🏽🇯🇵", "\u0301\u0300\u0308\u0327",
        "\u00a0\u2003\u3000\u200b", "ﬁ①²", "'s 'll 've 're 'd 'm 't ",
    ]
    for i in range(240):
        k = rng.randint(1, 4)
        pool = "".join(rng.sample(pools, k))
        s = "".join(rng.choice(pool) for _ in range(rng.randint(1, 120)))
        if i % 10 == 0:
            s += rng.choice(["<|im_end|>", "<|endoftext|>", "<think>", "</think>"]) + s[: rng.randint(0, 10)]
        b = s.encode("utf-8")
        if i % 12 == 5:  # a few random invalid bytes
            b = bytearray(b)
            for _ in range(rng.randint(1, 3)):
                b.insert(rng.randint(0, len(b)), rng.choice([0x80, 0xBF, 0xC0, 0xC3, 0xE2, 0xF0, 0xFF]))
            b = bytes(b)
        out.append(b)
    return out


def bench_text(rng):
    words = ["the", "model", "token", "quantized", "matrix", "and", "of", "to", "in", "is",
             "performance", "GPU", "kernel", "2048", "tok/s", "—", "模型", "量化", "的", "(x)",
             "don't", "it's", "\n", "    ", "def", "return", "😀", "naïve", "Zürich"]
    return " ".join(rng.choice(words) for _ in range(200000))


def chat_cases(config_path, out):
    import json
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    template = json.load(open(config_path))["chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    tpl = env.from_string(template)
    convs = [
        [("user", "Hi")],
        [("system", "You are terse."), ("user", "Hi")],
        [("user", "Hi"), ("assistant", "Hello!"), ("user", "More?")],
        [("user", "Q1"), ("assistant", "<think>\nr1\n</think>\n\nA1"), ("user", "Q2")],
        [("user", "Q1"), ("assistant", "<think>\n\nr1\n\n</think>\n\n\nA1")],
        [("user", "Q1"), ("assistant", "A1 no think")],
        [("system", "S"), ("user", "U1"), ("assistant", "A1"), ("system", "S2"), ("user", "U2")],
        [("user", "Q1"), ("assistant", "<think>r</think>A"), ("user", "Q2"), ("assistant", "<think>\nr2\n</think>\nA2")],
        [("user", "你好 😀 <|im_end|> inside"), ("assistant", "x</think>y</think>z")],
        [("user", "multi\nline\n\n message ")],
    ]
    n = 0
    with open(out, "w") as f:
        for conv in convs:
            for gen in (0, 1):
                for think in (0, 1):
                    msgs = [{"role": r, "content": c} for r, c in conv]
                    text = tpl.render(messages=msgs, add_generation_prompt=bool(gen),
                                      enable_thinking=bool(think), tools=None)
                    fields = [str(gen), str(think)]
                    for r, c in conv:
                        fields += [r.encode().hex(), c.encode().hex()]
                    fields.append(text.encode().hex())
                    f.write("\t".join(fields) + "\n")
                    n += 1
    return n


def main():
    path, out_cases, out_bench = sys.argv[1:4]
    rng = random.Random(14)
    if len(sys.argv) > 4:
        cfg = os.path.join(os.path.dirname(path), "tokenizer_config.json")
        print("chat template: %d renderings by jinja2" % chat_cases(cfg, sys.argv[4]))
    tok = Tokenizer.from_file(path)
    byte_ids = byte_token_ids(tok)
    n = 0
    with open(out_cases, "w") as f:
        for data in cases(rng):
            ids, dec = expected(tok, byte_ids, data)
            f.write("%s\t%s\t%s\n" % (data.hex(), " ".join(map(str, ids)), dec.hex()))
            n += 1
    text = bench_text(rng)
    with open(out_bench, "wb") as f:
        f.write(text.encode("utf-8"))
    tok.encode(text[:10000])
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        ids = tok.encode(text, add_special_tokens=False).ids
        best = min(best, time.perf_counter() - t0)
    mb = len(text.encode("utf-8")) / 1e6
    print("reference: %d cases; tokenizers %s encode (1 thread): %.2f MB in %.1f ms = %.2f MB/s, "
          "%d tokens" % (n, __import__("tokenizers").__version__, mb, best * 1e3, mb / best, len(ids)))


if __name__ == "__main__":
    main()
