"""A small random NLLB checkpoint in the published Hugging Face layout, for tests.

`build_checkpoint(dest)` writes what `facebook/nllb-200-distilled-600M` publishes — config.json,
generation_config.json, weights, sentencepiece.bpe.model, tokenizer_config.json,
special_tokens_map.json — with a tiny model and a sentencepiece model trained here on generated
text in a dozen scripts. transformers loads it like the real thing, so it is the oracle's input too.
"""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path

import sentencepiece as spm
import torch
from safetensors.torch import save_file
from transformers import M2M100Config, M2M100ForConditionalGeneration
from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

SENTENCEPIECE_FILE = "sentencepiece.bpe.model"
SENTENCEPIECE_VOCAB_SIZE = 1000
SPARE_EMBEDDING_ROWS = 2  # published: config.vocab_size 256206 = tokenizer length 256204 + 2
WEIGHT_FORMATS = ("safetensors", "bin", "sharded")
# The published pytorch_model.bin holds the shared embedding under these names as well.
TIED_EMBEDDING_COPIES = {
    "lm_head.weight",
    "model.encoder.embed_tokens.weight",
    "model.decoder.embed_tokens.weight",
}
PUBLISHED_GENERATION_CONFIG = {
    "_from_model_config": True,
    "bos_token_id": 0,
    "decoder_start_token_id": 2,
    "eos_token_id": 2,
    "max_length": 200,
    "pad_token_id": 1,
    "transformers_version": "4.27.0.dev0",
}

# Words per language; sentences are drawn from them. Languages written without spaces join
# their words directly.
WORDS = {
    "en": "the a cat dog house river city small big green quickly reads writes sees book letter "
    "mountain friend teacher morning evening don't it's we they old new water bread walks "
    "sings tomorrow yesterday beautiful children window street".split(),
    "fr": "le la les un une chat chien maison rivière ville petit grand vert écrit lit voit livre "
    "lettre montagne ami professeur matin soir très où déjà l'ami c'est garçon cœur été "
    "fenêtre rue demain hier enfants pain eau".split(),
    "de": "der die das ein eine Katze Hund Haus Fluss Stadt klein groß grün schreibt liest sieht "
    "Buch Brief Berg Freund Lehrer Morgen Abend schön Mädchen über Straße Fenster Kinder "
    "Wasser Brot morgen gestern".split(),
    "ru": "кошка собака дом река город маленький большой зелёный пишет читает видит книга "
    "письмо гора друг учитель утро вечер очень где уже окно улица дети вода хлеб завтра "
    "вчера красивый".split(),
    "el": "η ο το γάτα σκύλος σπίτι ποτάμι πόλη μικρός μεγάλος πράσινος γράφει διαβάζει βλέπει "
    "βιβλίο γράμμα βουνό φίλος δάσκαλος πρωί βράδυ πολύ παράθυρο δρόμος παιδιά νερό "
    "ψωμί αύριο χθες".split(),
    "ar": "القطة الكلب البيت النهر المدينة صغير كبير أخضر يكتب يقرأ يرى كتاب رسالة جبل صديق "
    "معلم صباح مساء جدا النافذة الشارع الأطفال الماء الخبز غدا أمس جميل في من إلى".split(),
    "hi": "बिल्ली कुत्ता घर नदी शहर छोटा बड़ा हरा लिखता पढ़ता देखता किताब पत्र पहाड़ दोस्त "
    "शिक्षक सुबह शाम है बहुत खिड़की सड़क बच्चे पानी रोटी कल सुंदर में से को".split(),
    "zh": "猫 狗 房子 河 城市 小 大 绿色 写 读 看 书 信 山 朋友 老师 早上 晚上 我 你 他 是 的 很 在 "
    "窗户 街道 孩子 水 面包 明天 昨天 漂亮 學校 國家 貓".split(),
    "ja": "猫 犬 家 川 町 小さい 大きい 緑 書きます 読みます 見ます 本 手紙 山 友達 先生 朝 夜 "
    "は が を に です コーヒー テレビ 窓 道 子供 水 パン 明日 昨日 きれい".split(),
    "th": "แมว สุนัข บ้าน แม่น้ำ เมือง เล็ก ใหญ่ สีเขียว เขียน อ่าน เห็น หนังสือ จดหมาย ภูเขา "
    "เพื่อน ครู ตอนเช้า ตอนเย็น มาก หน้าต่าง ถนน เด็ก น้ำ ขนมปัง พรุ่งนี้ เมื่อวาน สวย".split(),
}
UNSPACED = {"zh", "ja", "th"}
SENTENCE_ENDS = {
    "en": ".!?", "fr": ".!?", "de": ".!?", "ru": ".!?", "el": ".;", "ar": ".؟", "hi": "।?",
    "zh": "。！？", "ja": "。！？",
    "th": [""],  # Thai has no sentence punctuation
}
PUNCTUATION_INSIDE = [",", ";", ":", " -", " (1)", ' "', " «", "»", "...", " 2024", " 3,5", " 42%"]


def training_sentences(count: int = 4000, seed: int = 1234) -> list[str]:
    """Deterministic sentences in every language of WORDS, with digits and punctuation."""
    rng = random.Random(seed)
    languages = sorted(WORDS)
    sentences = []
    for index in range(count):
        language = languages[index % len(languages)]
        words = [rng.choice(WORDS[language]) for _ in range(rng.randint(3, 12))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 10_000)))
        if rng.random() < 0.3:
            position = rng.randrange(len(words))
            words[position] += rng.choice(PUNCTUATION_INSIDE)
        text = ("" if language in UNSPACED else " ").join(words)
        text = text[0].upper() + text[1:] + rng.choice(SENTENCE_ENDS[language])
        sentences.append(text)
    return sentences


def train_sentencepiece(path: Path, vocab_size: int = SENTENCEPIECE_VOCAB_SIZE) -> None:
    """Train a BPE sentencepiece model the way NLLB's was set up: unk=0, <s>=1, </s>=2, no pad."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_sentences()),
        model_writer=model,
        model_type="bpe",
        vocab_size=vocab_size,
        character_coverage=0.9995,
        num_threads=1,  # deterministic
        minloglevel=2,  # quiet
    )
    path.write_bytes(model.getvalue())


def build_checkpoint(
    dest: Path,
    *,
    d_model: int = 32,
    encoder_layers: int = 2,
    decoder_layers: int = 2,
    heads: int = 4,
    ffn_dim: int = 64,
    seed: int = 0,
    weights: str = "safetensors",
    max_position_embeddings: int = 128,
) -> Path:
    """Write a random NLLB checkpoint to `dest` and return `dest`.

    weights: "safetensors" (model.safetensors, the tied embedding once, as save_pretrained writes),
    "bin" (pytorch_model.bin with every key, as published) or "sharded" (encoder and embedding in
    model-00001-of-00002.safetensors, decoder in model-00002-of-00002.safetensors, and
    model.safetensors.index.json).
    """
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {WEIGHT_FORMATS}, not {weights!r}")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    train_sentencepiece(dest / SENTENCEPIECE_FILE)
    pieces = spm.SentencePieceProcessor(model_file=str(dest / SENTENCEPIECE_FILE)).get_piece_size()
    tokenizer_length = pieces + 1 + len(FAIRSEQ_LANGUAGE_CODES) + 1  # specials+pieces, codes, <mask>
    _write_tokenizer_files(dest, pieces)
    config = _published_config(
        vocab_size=tokenizer_length + SPARE_EMBEDDING_ROWS,
        d_model=d_model,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        heads=heads,
        ffn_dim=ffn_dim,
        max_position_embeddings=max_position_embeddings,
    )
    _write_json(dest / "config.json", config)
    _write_json(dest / "generation_config.json", PUBLISHED_GENERATION_CONFIG)
    _write_weights(dest, _random_state_dict(dest, seed), weights)
    return dest


def _published_config(*, vocab_size, d_model, encoder_layers, decoder_layers, heads, ffn_dim,
                      max_position_embeddings) -> dict:
    """facebook/nllb-200-distilled-600M's config.json with our sizes."""
    return {
        "_name_or_path": "facebook/nllb-200-distilled-600M",
        "activation_dropout": 0.0,
        "activation_function": "relu",
        "architectures": ["M2M100ForConditionalGeneration"],
        "attention_dropout": 0.1,
        "bos_token_id": 0,
        "d_model": d_model,
        "decoder_attention_heads": heads,
        "decoder_ffn_dim": ffn_dim,
        "decoder_layerdrop": 0,
        "decoder_layers": decoder_layers,
        "decoder_start_token_id": 2,
        "dropout": 0.1,
        "encoder_attention_heads": heads,
        "encoder_ffn_dim": ffn_dim,
        "encoder_layerdrop": 0,
        "encoder_layers": encoder_layers,
        "eos_token_id": 2,
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "max_length": 200,
        "max_position_embeddings": max_position_embeddings,
        "model_type": "m2m_100",
        "num_hidden_layers": encoder_layers,
        "pad_token_id": 1,
        "scale_embedding": True,
        "tokenizer_class": "NllbTokenizer",
        "torch_dtype": "float32",
        "transformers_version": "4.21.0.dev0",
        "use_cache": True,
        "vocab_size": vocab_size,
    }


def _write_tokenizer_files(dest: Path, pieces: int) -> None:
    """tokenizer_config.json and special_tokens_map.json as published. added_tokens_decoder pins
    the published ids: codes right after the pieces, <mask> last (without it transformers 5 puts
    <mask> before the codes)."""
    def special(content: str, **flags) -> dict:
        return {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
                "single_word": False, "special": True, **flags}

    mask = {"lstrip": True, "normalized": True}
    added = {str(i): special(token) for i, token in enumerate(["<s>", "<pad>", "</s>", "<unk>"])}
    added |= {str(pieces + 1 + i): special(code) for i, code in enumerate(FAIRSEQ_LANGUAGE_CODES)}
    added[str(pieces + 1 + len(FAIRSEQ_LANGUAGE_CODES))] = special("<mask>", **mask)
    _write_json(dest / "tokenizer_config.json", {
        "added_tokens_decoder": added,
        "additional_special_tokens": FAIRSEQ_LANGUAGE_CODES,
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": True,
        "cls_token": "<s>",
        "eos_token": "</s>",
        "legacy_behaviour": False,
        "mask_token": "<mask>",
        "model_max_length": 1024,
        "pad_token": "<pad>",
        "sep_token": "</s>",
        "sp_model_kwargs": {},
        "src_lang": None,
        "tgt_lang": None,
        "tokenizer_class": "NllbTokenizer",
        "tokenizer_file": None,
        "unk_token": "<unk>",
    })
    _write_json(dest / "special_tokens_map.json", {
        "additional_special_tokens": FAIRSEQ_LANGUAGE_CODES,
        "bos_token": "<s>",
        "cls_token": "<s>",
        "eos_token": "</s>",
        "mask_token": {key: value for key, value in special("<mask>", **mask).items() if key != "special"},
        "pad_token": "<pad>",
        "sep_token": "</s>",
        "unk_token": "<unk>",
    })


def _random_state_dict(dest: Path, seed: int) -> dict[str, torch.Tensor]:
    """The model's weights, scaled so that each decoding step has a clear winner: with the default
    std of 0.02 the output is nearly uniform and beam search meets ties that rounding decides."""
    with torch.random.fork_rng():  # leave the test process's random state alone
        model = M2M100ForConditionalGeneration(M2M100Config.from_pretrained(dest))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():  # tied matrices come once
            noise = torch.randn(parameter.shape, generator=generator)
            if parameter.dim() == 2:  # (out, in) matrices and the (vocab, d_model) embedding
                parameter.copy_(noise * 3 / math.sqrt(parameter.shape[1]))
            elif name.endswith("norm.weight"):
                parameter.copy_(1 + 0.1 * noise)
            else:  # biases
                parameter.copy_(0.1 * noise)
    return model.state_dict()


def _write_weights(dest: Path, state: dict[str, torch.Tensor], weights: str) -> None:
    if weights == "bin":
        torch.save(state, dest / "pytorch_model.bin")
        return
    # safetensors cannot hold one tensor under several names: the shared embedding goes in once,
    # as save_pretrained writes it.
    tensors = {name: tensor for name, tensor in state.items() if name not in TIED_EMBEDDING_COPIES}
    metadata = {"format": "pt"}  # as save_pretrained writes (older transformers require it)
    if weights == "safetensors":
        save_file(tensors, dest / "model.safetensors", metadata=metadata)
        return
    # sharded: the encoder and the shared embedding in the first file, the decoder in the second
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {name: shards[name.startswith("model.decoder.")] for name in tensors}
    for shard in shards:
        shard_tensors = {name: tensor for name, tensor in tensors.items() if weight_map[name] == shard}
        save_file(shard_tensors, dest / shard, metadata=metadata)
    total_size = sum(tensor.numel() * tensor.element_size() for tensor in tensors.values())
    index = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    _write_json(dest / "model.safetensors.index.json", index)


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
