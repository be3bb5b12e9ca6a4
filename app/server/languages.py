"""The language codes of the two APIs, mapped to the FLORES-200 codes the engine speaks.

LibreTranslate's clients send ISO 639-1 codes in lower case (`en`, `fr`), `zh-Hans`/`zh-Hant`
(older ones `zh`, `zt`) and `pt-BR` (`pb`); DeepL's clients send its own upper-case codes (`EN`,
`EN-GB`, `PT-BR`, `ZH-HANS`: `DEEPL_LANGUAGES`). Both also take any ISO 639-1 code NLLB has, and a
FLORES-200 code as it is (`ace_Arab`), so that every NLLB language can be reached. A code that
maps to nothing is None: the API says it is not supported.
"""

from __future__ import annotations

from dragoman.engine import ISO_639_1, LANGUAGE_CODES, LANGUAGES, get_language

# DeepL API v2's languages (source codes and the regional target variants) as FLORES-200 codes.
DEEPL_LANGUAGES = {
    "AR": "arb_Arab", "BG": "bul_Cyrl", "CS": "ces_Latn", "DA": "dan_Latn", "DE": "deu_Latn",
    "EL": "ell_Grek", "EN": "eng_Latn", "EN-GB": "eng_Latn", "EN-US": "eng_Latn", "ES": "spa_Latn",
    "ES-419": "spa_Latn", "ET": "est_Latn", "FI": "fin_Latn", "FR": "fra_Latn", "HE": "heb_Hebr",
    "HU": "hun_Latn", "ID": "ind_Latn", "IT": "ita_Latn", "JA": "jpn_Jpan", "KO": "kor_Hang",
    "LT": "lit_Latn", "LV": "lvs_Latn", "NB": "nob_Latn", "NL": "nld_Latn", "PL": "pol_Latn",
    "PT": "por_Latn", "PT-BR": "por_Latn", "PT-PT": "por_Latn", "RO": "ron_Latn", "RU": "rus_Cyrl",
    "SK": "slk_Latn", "SL": "slv_Latn", "SV": "swe_Latn", "TH": "tha_Thai", "TR": "tur_Latn",
    "UK": "ukr_Cyrl", "VI": "vie_Latn", "ZH": "zho_Hans", "ZH-HANS": "zho_Hans", "ZH-HANT": "zho_Hant",
}
# DeepL lists these only as targets; their sources are the base codes.
DEEPL_TARGET_ONLY = frozenset({"EN-GB", "EN-US", "ES-419", "PT-BR", "PT-PT", "ZH-HANS", "ZH-HANT"})
DEEPL_NOT_TARGETS = frozenset({"EN", "PT"})  # deprecated as targets: the client asks for a variant
# LibreTranslate's codes that are not ISO 639-1 (language.py's aliases, and the BCP 47 forms it lists).
LIBRETRANSLATE_ALIASES = {"zh": "zho_Hans", "zh-hans": "zho_Hans", "zt": "zho_Hant", "zh-hant": "zho_Hant",
                          "pb": "por_Latn", "pt-br": "por_Latn"}
_ISO_OF = {flores: iso for iso, flores in ISO_639_1.items() if iso != "no"}  # "nb" names Bokmål


def _flores(code: str) -> str | None:
    return code if code in LANGUAGE_CODES else None


def libretranslate_language(code: str) -> str | None:
    """The FLORES-200 code for a LibreTranslate language code (not "auto"), or None."""
    lower = code.strip().lower()
    return LIBRETRANSLATE_ALIASES.get(lower) or ISO_639_1.get(lower) or _flores(code.strip())


def libretranslate_code(flores: str) -> str:
    """The code LibreTranslate's clients know a language by: `zh-Hans`, `en`, else the FLORES-200 code."""
    if flores in ("zho_Hans", "zho_Hant"):
        return "zh-" + flores[-4:]
    return _ISO_OF.get(flores, flores)


def deepl_language(code: str) -> str | None:
    """The FLORES-200 code for a DeepL language code (any case), or None."""
    upper = code.strip().upper()
    return DEEPL_LANGUAGES.get(upper) or ISO_639_1.get(upper.lower()) or _flores(code.strip())


def deepl_code(flores: str) -> str:
    """The DeepL source code of a language (`EN`, `ZH` for either Chinese), else its ISO 639-1 code in
    upper case, else the FLORES-200 code."""
    for code, language in DEEPL_LANGUAGES.items():
        if language == flores:
            return code.split("-")[0]
    iso = _ISO_OF.get(flores)
    return iso.upper() if iso else flores


def deepl_languages(target: bool) -> list[dict]:
    """`/v2/languages`: DeepL's own codes first (variants as targets), then every other NLLB language."""
    own = [code for code in DEEPL_LANGUAGES
           if (code not in DEEPL_NOT_TARGETS if target else code not in DEEPL_TARGET_ONLY)]
    covered = {DEEPL_LANGUAGES[code] for code in own}
    listed = [(code, DEEPL_LANGUAGES[code]) for code in own]
    listed += [(deepl_code(language.code), language.code) for language in LANGUAGES
               if language.code not in covered and deepl_code(language.code) not in DEEPL_LANGUAGES]
    extra = {"supports_formality": False} if target else {}
    return [{"language": code, "name": get_language(flores).name, **extra} for code, flores in listed]


def libretranslate_languages() -> list[dict]:
    """`/languages`: every NLLB language, each a target of every other."""
    codes = [libretranslate_code(language.code) for language in LANGUAGES]
    return [{"code": code, "name": language.name, "targets": [c for c in codes if c != code]}
            for code, language in zip(codes, LANGUAGES)]
