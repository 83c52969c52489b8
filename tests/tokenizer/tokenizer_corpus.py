"""Deterministic tokenizer test corpus: many scripts, emoji, code, whitespace runs, numbers,
special tokens embedded in text, edge cases. Same strings on every run (seeded generator)."""
import random

SCRIPTS = {
    "latin": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "accents": "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßœŒÀÉÎÕÜŠŽčćđłńśźżăşţ",
    "cyrillic": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЭЮЯіїєґ",
    "greek": "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩάέήίόύώϊϋΐ",
    "arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهويءآأؤإئةىً ٌ ٍ َ ُ ِ ّ ْ",
    "hebrew": "אבגדהוזחטיכלמנסעפצקרשתךםןףץ",
    "devanagari": "अआइईउऊऋएऐओऔकखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसह्ािीुूेैोौंः",
    "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴",
    "thai": "กขฃคฅฆงจฉชซฌญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮะัาำิีึืุูเแโใไ่้๊๋็์",
    "korean": "가각간갇갈감갑강개객거건걸검겁게겨격견결겸경계고곡곤골공과관광괴교구국군굴궁권귀규균그극근글금급기긴길김나낙난날남납낭내녀년념녕노녹논농뇌누눈뉴느늘능니다단달담답당대덕도독돌동두둔득등라락란람랑래량려력련렬렴령례로록론뢰료룡루류륙륜률륭르름릉리린림립마막만말망매맥맹면멸명모목몰몽묘무묵문물미민밀바박반발방배백번벌범법벽변별병보복본봉부북분불붕비빈빙사삭산살삼상새색생서석선설섬섭성세소속손솔송쇄수숙순술숭습승시식신실심십아악안알암압앙애액야약양어억언엄업에여역연열염엽영예오옥온올옹와완왕외요욕용우욱운울웅원월위유육윤율융은을음읍응의이익인일임입자작잔잠잡장재쟁저적전절점접정제조족존졸종좌죄주죽준중즉증지직진질집징차착찬찰참창채책처척천철첨청체초촉촌총최추축춘출충취측층치칙친칠침칭쾌타탁탄탈탐탑탕태택토통퇴투특파판팔패편평폐포폭표품풍피필하학한할함합항해핵행향허헌험혁현혈협형혜호혹혼홍화확환활황회획횡효후훈훼휘휴흉흑흥희",
    "emoji": ["😀", "😂", "🥲", "👍", "👍🏽", "🎉", "🔥", "❤️", "🚀", "🤖", "🧠", "🌍", "🍕", "👨‍👩‍👧‍👦", "👩‍💻", "🏳️‍🌈", "🧑🏿‍🚀", "🇫🇷", "🇯🇵", "🇺🇸", "🇧🇷", "🏴‍☠️", "✅", "⚠️", "©", "™", "½", "²", "∑", "≠", "→", "€", "£", "¥", "₹"],
}

CODE_SNIPPETS = [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "const x = {a: 1, b: [2, 3], 'c': \"d\"};\nconsole.log(x?.a ?? 0);",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "<div class=\"x\"><p>Hello &amp; welcome</p></div>",
    "fn main() { let v: Vec<u8> = vec![1, 2, 3]; println!(\"{:?}\", v); }",
    "$ ls -la | grep '^d' && echo \"done\" > /dev/null 2>&1",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares",
    "if (a && b || !c) { return a->b.c[0]; }",
    "{\"key\": \"value\", \"n\": 3.14e-10, \"ok\": true, \"list\": [null]}",
    "    indented\n        more\n\t\ttabs\n",
]

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "I'm", "don't", "we're",
         "they've", "she'll", "it's", "you'd", "HELLO", "World", "tokenizer", "naïve", "café",
         "résumé", "Straße", "München", "İstanbul", "ﬁnance", "A.I.", "e.g.", "U.S.A", "3rd", "1st"]

WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n ",
              "\u00a0", "\u3000", "\u2009", "\u0085", " \t \n"]


def _numbers(rng):
    out = [str(rng.randrange(10 ** k)) for k in range(1, 25)]
    out += ["0", "00", "007", "3.14159", "-42", "1,000,000", "1e10", "0x1F", "١٢٣", "४२", "٣.١٤", "１２３"]
    return out


def _special_tokens(model):
    if model == "gemma-4":
        return ["<|turn>", "<turn|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
                "<|\"|>", "<|channel>", "<channel|>", "<|think|>", "<|tool>", "<tool|>", "<|image|>", "<|image>",
                "<image|>", "<|audio|>", "<|video|>", "<bos>", "<eos>", "<pad>", "<mask>", "</s>", "<unused0>",
                "[multimodal]"]
    if model == "smollm2-135m":
        return ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>", "<jupyter_code>",
                "<repo_name>", "<empty_output>"]
    if model.startswith("qwen"):
        return ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>",
                "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|repo_name|>", "<|file_sep|>"]
    return ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>",
            "<start_of_image>", "<unused0>", "<unused17>", "[multimodal]", "<table>", "</td>", "<h1>"]


def _script_text(rng, chars, n):
    if isinstance(chars, list):
        return "".join(rng.choice(chars) for _ in range(n))
    return "".join(rng.choice(chars) for _ in range(n))


def _sentence(rng, model):
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.35:
            parts.append(rng.choice(WORDS))
        elif kind < 0.65:
            name = rng.choice(list(SCRIPTS))
            parts.append(_script_text(rng, SCRIPTS[name], rng.randint(1, 8)))
        elif kind < 0.75:
            parts.append(rng.choice(_numbers(rng)))
        elif kind < 0.85:
            parts.append(rng.choice(_special_tokens(model)))
        elif kind < 0.92:
            parts.append(rng.choice(".,!?;:-()[]{}\"'/\\@#$%^&*_+=<>|`~…—–«»„“”‘’"))
        else:
            parts.append(rng.choice(CODE_SNIPPETS)[: rng.randint(1, 40)])
        parts.append(rng.choice(WHITESPACE) if rng.random() < 0.3 else " ")
    text = "".join(parts)
    if rng.random() < 0.3:
        text = rng.choice(WHITESPACE) + text
    if rng.random() < 0.3:
        text = text.rstrip(" ") if rng.random() < 0.5 else text + rng.choice(WHITESPACE)
    return text


def build_corpus(model, n_random=1100, seed=20240611):
    rng = random.Random(seed)
    corpus = ["", " ", "  ", "\n", "\t", "a", " a", "a ", "  leading and trailing  ", "Hello world",
              "Hello World!", "hello\nworld", "\n\n\n", " \n \n ", "\r\n\r\n", "   \t\t   \n\n   "]
    for name, chars in SCRIPTS.items():
        corpus.append(_script_text(rng, chars, 40))
        corpus.append(" " + _script_text(rng, chars, 5) + " " + _script_text(rng, chars, 7))
    corpus += CODE_SNIPPETS
    corpus += _numbers(rng)
    corpus += [w + " " + w.upper() for w in WORDS]
    corpus += [" " * k for k in range(1, 40, 3)] + ["\n" * k for k in range(1, 35, 4)]
    corpus += ["x" + " " * k + "y" for k in range(1, 35, 2)]
    for token in _special_tokens(model):
        corpus += [token, token + token, "a" + token + "b", " " + token + " ", token[:-1], token + "\n"]
    corpus += ["👨‍👩‍👧‍👦👨‍👩‍👧‍👦", "🇫🇷🇩🇪🇮🇹", "e\u0301", "\u200bzero\u200dwidth\ufeff", "\U0001F600" * 5,
               "\x00nul\x01ctl\x1f", "\ufffd", "\U0010FFFD", "\uE000private", "a\u0301\u0302\u0303"]
    while len(corpus) < n_random + 200:
        corpus.append(_sentence(rng, model))
    return corpus
