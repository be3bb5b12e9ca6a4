"""The 202 FLORES-200 languages of NLLB-200, in token-id order, and lookup with suggestions."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass

from dragoman import resources


@dataclass(frozen=True)
class Language:
    code: str  # FLORES-200 code, e.g. "fra_Latn"
    name: str  # English name, e.g. "French"
    native: str  # the language's name for itself, e.g. "Français"
    script: str  # ISO 15924 script code, e.g. "Latn"


# Scripts written without spaces between words: a sentence splits, formatting moves and a term is
# tokenized at any character there, not at spaces.
NO_SPACE_SCRIPTS = frozenset({"Hans", "Hant", "Hani", "Jpan", "Mymr", "Thai", "Laoo", "Khmr", "Tibt"})

# The file order is NLLB's: the tokenizer gives the language at index i the id len(pieces) + 1 + i.
LANGUAGES: tuple[Language, ...] = tuple(
    Language(**entry)
    for entry in json.loads(resources.path("languages.json").read_text(encoding="utf-8"))
)
LANGUAGE_CODES: tuple[str, ...] = tuple(language.code for language in LANGUAGES)
_BY_CODE = {language.code: language for language in LANGUAGES}

# ISO 639-1 codes people type, mapped to the FLORES-200 variety NLLB was trained on for them.
ISO_639_1 = dict(pair.split(":") for pair in """
    af:afr_Latn ak:aka_Latn am:amh_Ethi ar:arb_Arab as:asm_Beng ay:ayr_Latn az:azj_Latn
    ba:bak_Cyrl be:bel_Cyrl bg:bul_Cyrl bm:bam_Latn bn:ben_Beng bo:bod_Tibt bs:bos_Latn
    ca:cat_Latn cs:ces_Latn cy:cym_Latn da:dan_Latn de:deu_Latn dz:dzo_Tibt ee:ewe_Latn
    el:ell_Grek en:eng_Latn eo:epo_Latn es:spa_Latn et:est_Latn eu:eus_Latn fa:pes_Arab
    fi:fin_Latn fj:fij_Latn fo:fao_Latn fr:fra_Latn ga:gle_Latn gd:gla_Latn gl:glg_Latn
    gn:grn_Latn gu:guj_Gujr ha:hau_Latn he:heb_Hebr hi:hin_Deva hr:hrv_Latn ht:hat_Latn
    hu:hun_Latn hy:hye_Armn id:ind_Latn ig:ibo_Latn is:isl_Latn it:ita_Latn ja:jpn_Jpan
    jv:jav_Latn ka:kat_Geor kg:kon_Latn ki:kik_Latn kk:kaz_Cyrl km:khm_Khmr kn:kan_Knda
    ko:kor_Hang ks:kas_Arab ku:kmr_Latn ky:kir_Cyrl lb:ltz_Latn lg:lug_Latn li:lim_Latn
    ln:lin_Latn lo:lao_Laoo lt:lit_Latn lv:lvs_Latn mg:plt_Latn mi:mri_Latn mk:mkd_Cyrl
    ml:mal_Mlym mn:khk_Cyrl mr:mar_Deva ms:zsm_Latn mt:mlt_Latn my:mya_Mymr nb:nob_Latn
    ne:npi_Deva nl:nld_Latn nn:nno_Latn no:nob_Latn ny:nya_Latn oc:oci_Latn om:gaz_Latn
    or:ory_Orya pa:pan_Guru pl:pol_Latn ps:pbt_Arab pt:por_Latn qu:quy_Latn rn:run_Latn
    ro:ron_Latn ru:rus_Cyrl rw:kin_Latn sa:san_Deva sc:srd_Latn sd:snd_Arab sg:sag_Latn
    si:sin_Sinh sk:slk_Latn sl:slv_Latn sm:smo_Latn sn:sna_Latn so:som_Latn sq:als_Latn
    sr:srp_Cyrl ss:ssw_Latn st:sot_Latn su:sun_Latn sv:swe_Latn sw:swh_Latn ta:tam_Taml
    te:tel_Telu tg:tgk_Cyrl th:tha_Thai ti:tir_Ethi tk:tuk_Latn tl:tgl_Latn tn:tsn_Latn
    tr:tur_Latn ts:tso_Latn tt:tat_Cyrl tw:twi_Latn ug:uig_Arab uk:ukr_Cyrl ur:urd_Arab
    uz:uzn_Latn vi:vie_Latn wo:wol_Latn xh:xho_Latn yi:ydd_Hebr yo:yor_Latn zh:zho_Hans
    zu:zul_Latn
""".split())

_MAIN_VARIETIES = set(ISO_639_1.values())
# English and native names, case-folded, to the language's code
_NAMES = {
    name.casefold(): language.code
    for language in LANGUAGES
    for name in (language.name, language.native)
}
MAX_SUGGESTIONS = 3


class UnknownLanguageError(ValueError):
    """A language code NLLB does not know; `suggestions` holds the nearest valid codes."""

    def __init__(self, code: str, suggestions: tuple[str, ...]):
        self.code = code
        self.suggestions = suggestions
        message = f"unknown language {code!r}"
        if suggestions:
            message += f"; did you mean {' or '.join(suggestions)}?"
        super().__init__(message)


def get_language(code: str) -> Language:
    """The language with FLORES-200 code `code` (exact, case-sensitive)."""
    try:
        return _BY_CODE[code]
    except KeyError:
        raise UnknownLanguageError(code, suggest_languages(code)) from None


def resolve_language(text: str) -> str:
    """`text` when it is a valid FLORES-200 code; otherwise UnknownLanguageError with suggestions."""
    return get_language(text).code


def suggest_languages(text: str) -> tuple[str, ...]:
    """Codes the user probably meant by `text`, best first: the code in another case, an ISO 639-1
    code (also as in "pt-BR"), an English or native name or a word of one, the 3-letter language
    part of a code; close spellings only when none of those match."""
    query = text.strip().casefold()
    iso_code = query.replace("-", "_").split("_")[0]
    candidates = [code for code in LANGUAGE_CODES if code.casefold() == query]
    if iso_code in ISO_639_1:
        candidates.append(ISO_639_1[iso_code])
    if query in _NAMES:
        candidates.append(_NAMES[query])
    # A word of a name: "chinese" or "中文" -> both Chinese scripts; "arabic" -> the Arabic
    # varieties (not "Acehnese (Arabic script)"), the one ISO 639-1 "ar" stands for first.
    word_matches = [
        language.code
        for language in LANGUAGES
        if query in language.name.casefold().split()
        or query in re.findall(r"\w+", language.native.casefold())
    ]
    candidates += sorted(word_matches, key=lambda code: code not in _MAIN_VARIETIES)
    if len(query) >= 3:
        candidates += [code for code in LANGUAGE_CODES if code[:3] == query[:3]]
    if not candidates:
        candidates += difflib.get_close_matches(text.strip(), LANGUAGE_CODES)
        candidates += [_NAMES[name] for name in difflib.get_close_matches(query, _NAMES)]
    return tuple(dict.fromkeys(candidates))[:MAX_SUGGESTIONS]
