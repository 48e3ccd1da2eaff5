"""What the judging pages (Judge, Adjudicate, Agreement) and the drill-down's "send to the pool"
show and do, without Streamlit: the pages in ``dashboards/views/`` only draw it.

* :func:`pair_view` — one (query, document) pair as a rater sees it: the query (text, type,
  language in words), the document's canonical address and its texts in sections
  (:func:`text_sections`: the original; the transliterations named by scheme — the edition's
  own simplified romanisation, IAST, a derived Cyrillic one; the translations named by
  translator, an exact duplicate shown once under every translator who gave it; word
  meanings and other fields named in words), each text with its BCP 47 language tag
  (``sa``, ``sa-Latn``, ``hi``, ``pi``) for the page's ``lang`` attribute, the query's words
  marked in them (:func:`highlight_html`), and the :func:`~workbench.judging.store.document_hash`
  of the document shown, which goes with the judgment. **Blind**: nothing about a config,
  lane, rank, score, pool tier or why the pair was pooled is part of it.
* :func:`query_terms` / :func:`highlight_html` — which words are marked. Matching is
  diacritic-folded (:func:`workbench.text.normalize.match_form`, then
  :func:`workbench.text.normalize.ascii_fold`: ``satipatthana`` marks ``satipaṭṭhānaṁ``; ``ṃ`` and
  ``ṁ`` are one letter). A text word is marked when it is a query word, or that word's stem
  with an inflectional ending of its script (:data:`MARK_ENDINGS`: Pali and Sanskrit nominal
  endings and English ``-s -es -ed -ing`` for the Latin script, Russian endings for Cyrillic,
  Sanskrit and Hindi endings for Devanagari), the stem being the query word less its own
  ending: ``dhamma`` marks *dhammassa* and *dhammo*, ``pleasure`` marks *pleasures*, but
  ``पुरुष`` does not mark *पुरुजित्* and ``sati`` does not mark *satipaṭṭhāna* (a longer word
  that merely begins alike is not marked). Query words shorter than :data:`MIN_TERM` letters
  are not marked — counted in letters, so a Devanagari vowel sign, virama or anusvara does
  not count (``मैं`` is one letter) — nor are function words (:data:`STOPWORDS`:
  scikit-learn's English list, Snowball's Russian list, Jacques Savoy's Hindi list).
  Words are marked in every script the document shows (:func:`mark_terms`): the words of a
  Sanskrit or Pali query (language ``sa`` or ``pi``), and any Latin word with IAST diacritics,
  are also read in IAST (:func:`workbench.text.query.query_forms`: from Devanagari, the Russian
  reader's Cyrillic, Harvard-Kyoto or Velthuis), which marks Latin-script words and Devanagari
  words read in IAST (:func:`workbench.text.translit.devanagari_to_iast`), and in the Russian
  reader's Cyrillic (:func:`workbench.text.translit.iast_to_cyrillic_many`), which marks Cyrillic
  words: ``abhyāsa``, ``abhyasa``, ``абхьяса`` and ``अभ्यास`` each mark *abhyāsaḥ* in the IAST
  transliteration and *अभ्यासः* in the Devanagari original. The words of an English, Hindi or
  Russian query are marked in their own script only (read in another script, the English
  ``name`` would mark a Hindi नाम).
* :func:`unjudged_docs` / :func:`send_to_pool` — the drill-down's documents without a label
  go to the judging pool (reason ``sent``), skipping pairs already pooled or judged.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.text.normalize import ascii_fold, match_form
from workbench.text.scripts import script_of
from workbench.text.translit import devanagari_to_iast, iast_to_cyrillic_many, is_iast_extended

#: The rater's buttons: (grade or None for "cannot judge", label, keyboard shortcut, widget-key stem).
#: A button's widget key is the stem and the assignment it grades (:func:`grade_key`), so a key press
#: queued before the page was redrawn can only reach the pair that was on screen.
GRADE_BUTTONS: tuple[tuple[int | None, str, str, str], ...] = (
    (0, "0 · not relevant", "0", "judge_g0"),
    (1, "1 · relevant", "1", "judge_g1"),
    (2, "2 · highly relevant", "2", "judge_g2"),
    (None, "cannot judge", "X", "judge_x"),
)
#: The undo button's shortcut and key.
UNDO_SHORTCUT, UNDO_KEY = "U", "judge_undo"

#: Each grade's button colour (background, text): grey for not relevant, blue for relevant, green for
#: highly relevant (Okabe & Ito's colour-blind-safe blue and bluish green); "cannot judge" stays plain.
GRADE_COLOURS: dict[int, tuple[str, str]] = {0: ("#5f6b7a", "#ffffff"), 1: ("#0072b2", "#ffffff"),
                                             2: ("#00795c", "#ffffff")}

#: Shortest time (seconds) a pair must have been on screen before a grade for it is taken: the
#: end of the page run that drew it to the press. A faster press is the second half of a double
#: press (80-300 ms apart), meant for the pair before; it is refused with a message.
MIN_SEEN_S = 0.5


def press_refusal(store, rater, action: Mapping[str, Any], held, shown: tuple[int, float] | None,
                  now: float) -> tuple[str, str] | None:
    """Whether the Judge page saves a queued grade press, decided before anything is written: None to save
    it, else ``(level, message)`` for the line above the pair (``level`` a Streamlit message kind:
    ``success``, ``warning``), and nothing is written.

    * The press's assignment is not the one the rater holds (``held``): when the rater's current judgment
      through it has the same grade, it is a second press of a key already saved (a double press, or the
      same grade from another tab) — ``success``, "already saved as 0 · not relevant (a second press was
      ignored)"; otherwise it is no longer open for them (judged with another grade, or taken over).
    * The pair was not fully on screen (``shown``, ``(assignment id, monotonic time its run ended)``) or
      for less than :data:`MIN_SEEN_S` seconds before ``now``: a quick second press meant for the pair before.

    Args:
        store: the :class:`~workbench.judging.store.JudgmentStore` (read only here).
        rater: the signed-in :class:`~workbench.judging.store.Rater`.
        action: the queued press: ``assignment_id``, ``grade`` (None: cannot judge), ``pair`` (the pair in
            words, :func:`pair_words`).
        held: the :class:`~workbench.judging.store.Assignment` the rater holds now, or None.
        shown: what the page drew last, or None.
        now: ``time.monotonic()`` at the press's run.

    Raises:
        PgError: the store's server cannot be reached.
    """
    aid, pair = action["assignment_id"], action["pair"]
    if held is None or held.assignment_id != aid:
        saved = store.saved_judgment(rater, aid)
        grade = action["grade"]
        if saved is not None and saved["cannot_judge"] == (grade is None) and saved["grade"] == grade:
            return ("success", f"{pair} is already saved as {grade_text(grade)} (a second press was ignored); "
                               "nothing more was written. The pair below is your next one.")
        return ("warning", f"Not saved: {pair} is no longer open for you — judged already (a second key press, or "
                           "another tab or window), or taken over by another rater after a long pause. Nothing was "
                           "written; the pair below is your next one.")
    if shown is None or shown[0] != aid:
        return ("warning", f"Not saved: that key press reached {pair} before it was fully on your screen (a quick "
                           "second press?). Nothing was written; read it, then press the key again.")
    if (age := now - shown[1]) < MIN_SEEN_S:
        return ("warning", f"Not saved: that key press came {age:.2f} s after {pair} appeared — too soon to have "
                           "read it (a quick second press?). Nothing was written; read it, then press the key again.")
    return None


def own_queue_line(here: int, elsewhere: int, dataset: str) -> str:
    """What the Adjudicate page says about the adjudicator's own Judge queue: ``here`` pairs of ``dataset`` and
    ``elsewhere`` pairs of other datasets wait for them to judge as a rater; ``""`` when none do.

    ``own_queue_line(3, 0, "gita")`` → ``"3 pair(s) of gita wait in your own Judge queue: …"``."""
    if here <= 0 and elsewhere <= 0:
        return ""
    if here > 0:
        what = f"{here} pair(s) of {dataset}" + (f" (and {elsewhere} of other datasets)" if elsewhere > 0 else "")
    else:
        what = f"{elsewhere} pair(s) of other datasets"
    return (f"{what} wait in your own Judge queue: as a rater too, you judge them blind on the Judge page. They "
            "never come to this page.")


def grade_key(stem: str, assignment_id: int) -> str:
    """The widget key of a grade button for one assignment: ``judge_g1_1234``."""
    return f"{stem}_{int(assignment_id)}"


def adjudication_key(grade: int, dataset: str, query_id: str, doc_id: str) -> str:
    """The widget key of an adjudicator's final-grade button for one pair: ``adj_g1_<12 hex of the pair>``."""
    return f"adj_g{int(grade)}_{pair_tag(dataset, query_id, doc_id)}"


def pair_tag(dataset: str, query_id: str, doc_id: str) -> str:
    """A short stable name of a pair for widget keys (12 hex digits of a sha1; CSS-class safe)."""
    import hashlib

    return hashlib.sha1(f"{dataset}\x00{query_id}\x00{doc_id}".encode()).hexdigest()[:12]


# ---------------------------------------------------------------- which words are marked


def fold(word: str) -> str:
    """The matching form of a word: NFC, lower case, one niggahīta, every diacritic dropped
    (``Satipaṭṭhānaṃ`` → ``satipatthanam``; a Devanagari virama and nukta go too)."""
    return ascii_fold(match_form(word))


def letters(word: str) -> int:
    """How many letters a word has: combining marks (Devanagari vowel signs, virama, anusvara;
    Latin diacritics left after NFC) do not count (``मैं`` → 1, ``तथा`` → 2, ``dhamma`` → 6)."""
    return sum(1 for c in word if unicodedata.category(c).startswith("L"))


#: scikit-learn's English stop list (``sklearn.feature_extraction.text.ENGLISH_STOP_WORDS``, the
#: Glasgow Information Retrieval Group's list) and the archaic forms of the older translations.
_ARCHAIC_ENGLISH = "thou thee thy thine ye hath doth art unto o shalt wilt dost canst"

#: Snowball's Russian stop list (snowballstem.org/algorithms/russian/stop.txt, BSD licence, as Lucene
#: ships it), less the content words it ranks among them (сказал, человек, жизнь, говорил, кажется,
#: сказать, сегодня, сказала, вдруг): a query about life (жизнь) should mark it.
_RUSSIAN = """
и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было вот от
меня еще нет о из ему теперь когда даже ну ли если уже или ни быть был него до вас нибудь опять уж вам ведь там
потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам чтоб без будто чего раз тоже себе
под будет ж тогда кто этот того потому этого какой совсем ним здесь этом один почти мой тем чтобы нее сейчас были
куда зачем всех никогда можно при наконец два об другой хоть после над больше тот через эти нас про всего них
какая много разве три эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более всегда
конечно всю между
"""

#: Jacques Savoy's Hindi stop list (University of Neuchâtel, BSD licence), as Lucene ships it in
#: lucene-analysis-common (``org/apache/lucene/analysis/hi/stopwords.txt``, with its spelling
#: variants) — no Python package installed here carries a Hindi list. Then the forms of "I",
#: "to be" and "and" it lacks, which fill the Gita's Hindi translations (मैं हूँ, तथा: the
#: scholar's report): added here.
_HINDI = """
अंदर अत अपना अपनी अपने अभी आदि आप इत्यादि इन इनका इन्हीं इन्हें इन्हों इस इसका इसकी इसके इसमें इसी इसे उन
उनका उनकी उनके उनको उन्हीं उन्हें उन्हों उस उसके उसी उसे एक एवं एस ऐसे और कई कर करता करते करना करने करें कहते
कहा का काफ़ी कि कितना किन्हें किन्हों किया किर किस किसी किसे की कुछ कुल के को कोई कौन कौनसा गया घर जब जहाँ
जा जितना जिन जिन्हें जिन्हों जिस जिसे जीधर जैसा जैसे जो तक तब तरह तिन तिन्हें तिन्हों तिस तिसे तो था थी थे
दबारा दिया दुसरा दूसरे दो द्वारा न नहीं ना निहायत नीचे ने पर पहले पूरा पे फिर बनी बही बहुत बाद बाला बिलकुल
भी भीतर मगर मानो मे में यदि यह यहाँ यही या यिह ये रखें रहा रहे ऱ्वासा लिए लिये लेकिन व वर्ग वह वहाँ वहीं
वाले वुह वे वग़ैरह संग सकता सकते सबसे सभी साथ साबुत साभ सारा से सो ही हुआ हुई हुए है हैं हो होता होती होते
होना होने अपनि जेसे होति सभि तिंहों इंहों दवारा इसि किंहें थि उंहों ओर जिंहें वहिं अभि बनि हि उंहिं उंहें हें
वगेरह एसे रवासा कोन निचे काफि उसि पुरा भितर हे बहि वहां कोइ यहां जिंहों तिंहें किसि कइ यहि इंहिं जिधर इंहें
अदि इतयादि हुइ कोनसा इसकि दुसरे जहां अप किंहों उनकि भि वरग हुअ जेसा नहिं
मैं मैंने मुझे मुझको मेरा मेरी मेरे हूँ हूं हम हमें हमारा हमारी हमारे तुम तू तुम्हें तुम्हारा तुम्हारी
तुम्हारे तथा अथवा एवम्
"""


@functools.lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = [*ENGLISH_STOP_WORDS, *_ARCHAIC_ENGLISH.split(), *_RUSSIAN.split(), *_HINDI.split()]
    return frozenset(fold(w) for w in words)


class _Stopwords:
    """:data:`STOPWORDS`: the folded function words never marked, read on first use."""

    def __contains__(self, word: object) -> bool:
        return word in _stopwords()

    def __iter__(self):
        return iter(_stopwords())

    def __len__(self) -> int:
        return len(_stopwords())


#: Words never marked, in matching form (:func:`fold`): see the lists above.
STOPWORDS = _Stopwords()

#: Shortest query word that is marked, in letters (:func:`letters`).
MIN_TERM = 3

# Inflectional endings by script, as written (folded when used). Latin: the case endings of Pali a-, ā-,
# i- and u-stems (as Geiger's *Pāli Grammar* tabulates them) and of Sanskrit ones (Whitney's *Sanskrit
# Grammar*), English -s -es -ed -ing. Cyrillic: Russian noun, adjective and verb endings. Devanagari: Sanskrit case
# endings after a consonant stem and the Hindi plural and oblique forms.
_ENDINGS_LATN = """
a o aṁ e ena āya assa ato asmā amhā asmiṁ amhi āni ehi ebhi ānaṁ esu ā āyo āhi ābhi āsu
i iṁ inā ino issa ismiṁ imhi iyo īhi ībhi īnaṁ īsu iyā iyaṁ ī
u uṁ unā uno ussa usmiṁ umhi avo ūhi ūbhi ūnaṁ ūsu ū
aḥ am āt asya au ābhyām āḥ ān aiḥ ebhyaḥ ānām eṣu ayoḥ iḥ im ayā aye eḥ ayaḥ īn ibhiḥ ibhyaḥ īnām iṣu yoḥ
uḥ um unā ave oḥ avaḥ ūn ubhiḥ ubhyaḥ ūnām uṣu ām āyāḥ āyām ābhiḥ ābhyaḥ āsu
s es ed ing
"""
_ENDINGS_CYRL = """
а я о е ё ы и у ю ь ом ем ём ой ей ою ею ам ям ами ями ах ях ов ев ий ый ая яя ое ее ые ие ого его ому ему ым им
ую юю ых их ыми ими ть ет ит ут ют ат ят ешь ишь ете ите л ла ло ли ся сь ется ится ются ятся
"""
_ENDINGS_DEVA = """
ः म् ं ेन ाय ात् स्य े ौ ाभ्याम् ाः ान् ैः ेभ्यः ानाम् ाणाम् ेषु योः ि िः िम् िना ये ेः यः ीन् िभिः िभ्यः ीनाम्
िषु ु ुः ुम् ुना वे ोः वः ून् ुभिः ुभ्यः ूनाम् ुषु ा ाम् या ायै ायाः ायाम् ाभिः ासु ी ों ें ाएँ ाओं ियाँ ियों ो
"""


@functools.lru_cache(maxsize=1)
def _endings() -> dict[str, frozenset[str]]:
    return {script: frozenset(fold(e) for e in text.split())
            for script, text in (("Latn", _ENDINGS_LATN), ("Cyrl", _ENDINGS_CYRL), ("Deva", _ENDINGS_DEVA))}


class _Endings(Mapping):
    """:data:`MARK_ENDINGS`: script → the folded inflectional endings (see the module docstring)."""

    def __getitem__(self, script: str) -> frozenset[str]:
        return _endings()[script]

    def __iter__(self):
        return iter(_endings())

    def __len__(self) -> int:
        return len(_endings())


#: Script (``Latn``, ``Cyrl``, ``Deva``) → the inflectional endings a marked word may carry, folded.
MARK_ENDINGS = _Endings()


def iso_script(word: str) -> str:
    """The ISO 15924 code of ``word``'s first letter: ``Deva``, ``Cyrl``, or ``Latn`` for anything else
    (the script family of that letter by :func:`workbench.text.scripts.script_of`, the one script rule)."""
    for c in word:
        if unicodedata.category(c).startswith("L"):
            return _ISO_CODE.get(script_of(c), "Latn")
    return "Latn"


#: :func:`workbench.text.scripts.script_of`'s families → ISO 15924 codes (the others are Latin script here).
_ISO_CODE = {"Devanagari": "Deva", "Cyrillic": "Cyrl"}


@functools.lru_cache(maxsize=1)
def _word_re() -> re.Pattern:
    """A word: a letter, then letters and combining marks (so Devanagari vowel signs and viramas stay
    inside their word; Python's ``\\w`` has no class for marks, so it is built once from Unicode). The
    Devanagari avagraha ``ऽ`` (an elided *a*) ends a word, as its apostrophe does in IAST: ``अभ्यासेऽप्यसमर्थोऽसि``
    is ``अभ्यासे``, ``प्यसमर्थो``, ``सि`` like ``abhyāse 'pyasamartho 'si``."""
    marks, start = [], None
    for cp in [*range(0x20000), *range(0xE0000, 0xE0200)]:  # every mark lies in these planes
        is_mark = unicodedata.category(chr(cp)).startswith("M")
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            marks.append((start, cp - 1))
            start = None
    if start is not None:
        marks.append((start, 0xE01FF))
    cls = "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in marks)
    return re.compile(f"[^\\W\\d_\u093d](?:[^\\W\\d_\u093d]|[{cls}])*")


def _terms(words: Iterable[str]) -> tuple[str, ...]:
    """The words folded, in order, without repeats, short words (:data:`MIN_TERM`) and :data:`STOPWORDS`."""
    out: list[str] = []
    for word in words:
        w = fold(word)
        if letters(w) >= MIN_TERM and w not in STOPWORDS and w not in out:
            out.append(w)
    return tuple(out)


def query_terms(text: str) -> tuple[str, ...]:
    """The folded words of a query that are marked in the documents in the query's own script (see the module
    docstring), in order: ``"The Dhamma of samsara"`` → ``("dhamma", "samsara")``."""
    return _terms(m.group() for m in _word_re().finditer(text or ""))


#: Query languages whose words are Sanskrit or Pali: marked in every script (:func:`mark_terms`).
CROSS_SCRIPT_LANGUAGES = frozenset({"sa", "pi"})


@dataclass(frozen=True)
class MarkTerms:
    """What a query marks in a document's texts (:func:`mark_terms`): words folded by :func:`fold`, but ``iast``.

    Attributes:
        own: the query's words in their own script (:func:`query_terms`).
        latin: its Sanskrit or Pali words in IAST: matched against Latin-script words, and against Devanagari
            words read in IAST.
        iast: those words in IAST as read (lower case, not folded), whose Russian reader's Cyrillic
            (:attr:`cyrillic`) is matched against Cyrillic words.
    """

    own: tuple[str, ...]
    latin: tuple[str, ...] = ()
    iast: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.own or self.latin)

    @property
    def cyrillic(self) -> tuple[str, ...]:
        """The Sanskrit or Pali words in the Russian reader's Cyrillic, folded (made on first use: Aksharamukha
        takes seconds to load, and most documents show no Cyrillic)."""
        return _cyrillic_terms(self.iast)


@functools.lru_cache(maxsize=1024)
def _cyrillic_terms(iast: tuple[str, ...]) -> tuple[str, ...]:
    return _terms(iast_to_cyrillic_many(list(iast))) if iast else ()


@functools.lru_cache(maxsize=1024)
def mark_terms(text: str, language: str = "") -> MarkTerms:
    """The words ``text`` (a query in ``language``, a BCP 47 code such as ``sa``) marks, in every script (see the
    module docstring): ``mark_terms("अभ्यास", "sa")`` → ``MarkTerms(own=("अभयास",), latin=("abhyasa",),
    iast=("abhyāsa",))``, whose :attr:`~MarkTerms.cyrillic` is ``("абхьяса",)``. The words of a query in another
    language are read in other scripts only when they carry IAST diacritics (``mark_terms("water", "en")`` →
    ``MarkTerms(own=("water",))``). Never raises on a string."""
    from workbench.text.query import clean, query_forms, to_iast

    own = query_terms(text)
    words = [m.group() for m in _word_re().finditer(text or "")]
    if language not in CROSS_SCRIPT_LANGUAGES:
        words = [w for w in words if iso_script(w) == "Latn" and is_iast_extended(w)]
    indic = " ".join(words)
    if not _terms(words):
        return MarkTerms(own)
    latin = _terms(w.group() for form in query_forms(indic) for w in _word_re().finditer(form)
                   if iso_script(w.group()) == "Latn")
    iast = [w.group().lower() for w in _word_re().finditer(to_iast(clean(indic))) if iso_script(w.group()) == "Latn"]
    return MarkTerms(own, latin, tuple(dict.fromkeys(iast)))


_VOWELS = {"Latn": set("aeiouy"), "Cyrl": set("аеиоуыэюяьъ")}


def _ends_in_consonant(stem: str, script: str) -> bool:
    last = stem[-1:]
    if not last or not unicodedata.category(last).startswith("L"):
        return False  # ends in a vowel sign or another mark
    if script == "Deva":
        return 0x915 <= ord(last) <= 0x939 or 0x958 <= ord(last) <= 0x95F  # a consonant, not an initial vowel
    return last not in _VOWELS.get(script, set())


@functools.lru_cache(maxsize=4096)
def _stems(term: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """The stems a word must begin with to be a form of ``term``, and the endings that may follow.

    The stems are the term itself and the term less its own ending: the shortest ending of its
    script it ends with that leaves a stem of at least :data:`MIN_TERM` letters ending in a
    consonant (``dhamma`` → ``dhamm``, ``abhāvaḥ`` → ``abhav``, ``pleasures`` → ``pleasur``;
    ``पुरुष`` has none)."""
    script = iso_script(term)
    endings = MARK_ENDINGS[script]
    stems = [term]
    for e in sorted(endings, key=lambda e: (len(e), e)):
        stem = term[:-len(e)]
        if term.endswith(e) and letters(stem) >= MIN_TERM and _ends_in_consonant(stem, script):
            stems.append(stem)
            break
    return tuple(stems), endings


def _matches(word: str, terms: Sequence[str]) -> bool:
    for t in terms:
        if word == t:
            return True
        stems, endings = _stems(t)
        if any(word.startswith(s) and word[len(s):] in endings for s in stems):
            return True
    return False


def _marked(word: str, terms: MarkTerms) -> bool:
    """Whether a word of a document is marked: a form of a query word in its own script, or of a Sanskrit or Pali
    query word in the word's script (a Devanagari word read in IAST)."""
    folded = fold(word)
    if _matches(folded, terms.own):
        return True
    script = iso_script(word)
    if script == "Cyrl":
        return _matches(folded, terms.cyrillic)
    if script == "Deva":
        return bool(terms.latin) and _matches(fold(devanagari_to_iast(word)), terms.latin)
    return _matches(folded, terms.latin)


def _marking(terms: Sequence[str] | MarkTerms) -> MarkTerms:
    return terms if isinstance(terms, MarkTerms) else MarkTerms(tuple(terms))


def highlight_html(text: str, terms: Sequence[str] | MarkTerms) -> str:
    """``text`` as HTML (escaped) with each word that matches a query term wrapped in ``<mark>``; ``terms``:
    :func:`mark_terms` (every script), or folded words (:func:`query_terms`: their own script only)."""
    marking = _marking(terms)
    if not marking:
        return html.escape(text)
    parts, last = [], 0
    for m in _word_re().finditer(text):
        if _marked(m.group(), marking):
            parts.append(html.escape(text[last:m.start()]))
            parts.append(f"<mark>{html.escape(m.group())}</mark>")
            last = m.end()
    parts.append(html.escape(text[last:]))
    return "".join(parts)


def marked_words(text: str, terms: Sequence[str] | MarkTerms) -> list[str]:
    """The words of ``text`` :func:`highlight_html` marks, in order (for tests and counts)."""
    marking = _marking(terms)
    return [m.group() for m in _word_re().finditer(text) if marking and _marked(m.group(), marking)]


# ---------------------------------------------------------------- a document's texts, labelled for a reader

#: Language codes in words.
LANGUAGE_WORDS = {"sa": "Sanskrit", "pi": "Pali", "hi": "Hindi", "en": "English", "ru": "Russian"}
#: Scripts in words.
SCRIPT_WORDS = {"Deva": "Devanagari", "Latn": "Latin script", "Cyrl": "Cyrillic"}
#: Query types in words.
QUERY_TYPE_WORDS = {"paraphrase": "paraphrase", "reference": "reference", "term": "term", "page_ref": "page reference"}
#: Each language's usual script: a text in another script gets the script in its language tag (``sa-Latn``).
_USUAL_SCRIPT = {"sa": "Deva", "hi": "Deva", "pi": "Latn", "en": "Latn", "ru": "Cyrl"}
#: Fields other than the original, transliterations and translations, in words.
FIELD_WORDS = {"word_meanings": "Word meanings", "word_meanings_iast": "Word meanings", "title": "Title"}


def language_words(code: str) -> str:
    """``en`` → ``English``; an unknown code as it is; ``und`` (undetermined) and empty → ``""``."""
    code = (code or "").strip()
    return "" if code in ("", "und") else LANGUAGE_WORDS.get(code, code)


def language_tag(language: str, script: str = "") -> str:
    """The BCP 47 tag for a ``lang`` attribute: ``sa`` (Devanagari), ``sa-Latn`` (a transliteration),
    ``hi``, ``pi``, ``pi-Cyrl``; ``""`` for an undetermined language."""
    language = (language or "").strip()
    if language in ("", "und"):
        return ""
    if script and script != _USUAL_SCRIPT.get(language, script):
        return f"{language}-{script}"
    return language


def _transliteration_label(field: str, source: str) -> str:
    if field == "transliteration_iast":
        return "IAST"
    if field == "transliteration":
        if source == "gita":  # workbench.data.loaders.gita: the data's own Hindi-oriented romanisation
            return "the edition's own simplified scheme (ṣh, śh, ch, ṛi for IAST ṣ, ś, c, ṛ)"
        return f"as {source} romanises it" if source else "as the source romanises it"
    return field.removeprefix("transliteration_").replace("_", " ").upper()


def _word_meanings_label(field: str, source: str) -> str:
    if field.endswith("_iast"):
        return "Sanskrit words in IAST"
    return "Sanskrit words in the edition's own scheme" if source == "gita" else ""


@dataclass(frozen=True)
class TextEntry:
    """One text of a document as a reader sees it: who or what it is (``Swami Sivananda · English``,
    ``IAST``; empty for a lone original), the text, and its BCP 47 language tag (:func:`language_tag`)."""

    label: str
    text: str
    lang: str


def text_sections(doc: Any, derive_cyrillic: bool = False) -> list[tuple[str, list[TextEntry]]]:
    """A document's texts in sections for a reader, in this order: ``Original`` (field ``root``,
    labelled by language and script), ``Transliterations`` (by scheme: the edition's own,
    IAST, or — for Latin-script Pali with ``derive_cyrillic`` and none stored — a Cyrillic one
    derived with :func:`workbench.text.normalize.to_cyrillic`), ``Translations`` (by translator,
    :attr:`workbench.types.Text.source`, and language), then every other field under its name
    in words (``Word meanings``). Within a section an exact duplicate text is shown once,
    labelled with every source that gave it. Empty texts are left out; so are empty sections."""
    sections: dict[str, list[tuple[str, str, str, str]]] = {}  # heading -> (label, text, lang, source)

    def add(heading: str, label: str, t, source: str = "") -> None:
        sections.setdefault(heading, []).append((label, t.text.strip(), language_tag(t.language, t.script), source))

    for t in doc.texts:
        if not t.text.strip():
            continue
        if t.field == "root":
            add("Original", ", ".join(x for x in (language_words(t.language), SCRIPT_WORDS.get(t.script, "")) if x), t)
        elif t.field.startswith("transliteration"):
            add("Transliterations", _transliteration_label(t.field, t.source), t)
        elif t.field == "translation":
            add("Translations", language_words(t.language), t, t.source)
        else:
            heading = FIELD_WORDS.get(t.field, t.field.replace("_", " ").capitalize())
            add(heading, _word_meanings_label(t.field, t.source) if t.field.startswith("word_meanings") else "", t)
    if derive_cyrillic and "Transliterations" not in sections:
        root = next((t for t in doc.texts if t.field == "root" and t.script == "Latn" and t.text.strip()), None)
        if root is not None:
            from workbench.text.normalize import to_cyrillic
            from workbench.types import Text

            add("Transliterations", "Cyrillic, derived (Aksharamukha's Russian scheme)",
                Text("transliteration", root.language, "Cyrl", to_cyrillic(root.text)))
    order = ["Original", "Transliterations", "Translations"]
    out = []
    for heading in [*order, *(h for h in sections if h not in order)]:
        if heading not in sections:
            continue
        merged: dict[tuple[str, str], list[str]] = {}  # (text, lang) -> the sources that gave it
        labels: dict[tuple[str, str], str] = {}
        for label, text, lang, source in sections[heading]:
            key = (text, lang)
            if key not in merged:
                merged[key], labels[key] = [], label
            if source and source not in merged[key]:
                merged[key].append(source)
        entries = []
        for (text, lang), sources in merged.items():
            who = "; ".join(sources)
            label = " · ".join(x for x in (who, labels[(text, lang)]) if x)
            entries.append(TextEntry(label, text, lang))
        out.append((heading, entries))
    return out


@dataclass(frozen=True)
class PairView:
    """One pair as the judging pages show it (blind: see the module docstring).

    Attributes:
        dataset, query_id, doc_id: the pair.
        query_text, query_type, language: the query (empty when it left the build).
        address: the document's canonical address (``BG 2.47``).
        sections: ``(heading, entries)`` per :func:`text_sections` section, each entry a
            :class:`TextEntry` whose ``text`` is HTML with the query's words marked.
        doc_hash: :func:`~workbench.judging.store.document_hash` of the document shown
            (None when the document is not in the current build: only "cannot judge" is then offered).
        marks: how many words are marked in all the texts.
    """

    dataset: str
    query_id: str
    doc_id: str
    query_text: str
    query_type: str
    language: str
    address: str
    sections: tuple[tuple[str, tuple[TextEntry, ...]], ...]
    doc_hash: str | None
    marks: int

    @property
    def missing(self) -> bool:
        """Whether the document is not in the current build of the dataset."""
        return self.doc_hash is None

    @property
    def query_lang(self) -> str:
        """The query text's BCP 47 tag (its script read from the text: a Latin-script Sanskrit term is ``sa-Latn``)."""
        return language_tag(self.language, iso_script(self.query_text))

    def caption(self, *, with_dataset: bool = True) -> str:
        """``Query · paraphrase · in Hindi · dataset gita``: the query's type and language in words (no
        language for an undetermined one: reference and page queries), the dataset when asked."""
        parts = ["Query", QUERY_TYPE_WORDS.get(self.query_type, self.query_type) or "type unknown"]
        if language_words(self.language):
            parts.append(f"in {language_words(self.language)}")
        if with_dataset:
            parts.append(f"dataset {self.dataset}")
        return " · ".join(parts)


def pair_view(dataset: str, query_id: str, doc_id: str, queries, documents: Mapping[str, Any], *,
              derive_cyrillic: bool = False) -> PairView:
    """Build the rater's view of one pair from a built dataset (:class:`~workbench.results.store.DatasetFiles`'s
    ``queries`` frame, indexed by ``query_id``, and ``documents``)."""
    from workbench.judging.store import document_hash

    if query_id in queries.index:
        q = queries.loc[query_id]
        qtext, qtype, lang = str(q["text"]), str(q["query_type"]), str(q["language"])
    else:
        qtext, qtype, lang = "", "", ""
    doc = documents.get(doc_id)
    if doc is None:
        return PairView(dataset, query_id, doc_id, qtext, qtype, lang, doc_id, (), None, 0)
    terms = mark_terms(qtext, lang)
    sections, marks = [], 0
    for heading, entries in text_sections(doc, derive_cyrillic=derive_cyrillic):
        shown = []
        for e in entries:
            shown.append(TextEntry(e.label, highlight_html(e.text, terms), e.lang))
            marks += len(marked_words(e.text, terms))
        sections.append((heading, tuple(shown)))
    return PairView(dataset, query_id, doc_id, qtext, qtype, lang, doc.address, tuple(sections), document_hash(doc),
                    marks)


def describe_pair(dataset: str, query_id: str, doc_id: str, queries, documents: Mapping[str, Any],
                  width: int = 80) -> tuple[str, str]:
    """``(address, query text)`` of a pair for messages and tables, the query cut to ``width``
    characters; the ids where the build no longer has them."""
    doc = documents.get(doc_id)
    address = doc.address if doc is not None else doc_id
    text = str(queries.at[query_id, "text"]) if query_id in queries.index else query_id
    return address, shorten(text, width)


def shorten(text: str, width: int = 80) -> str:
    """One line of at most ``width`` characters, cut at a word with ``…``."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[:width - 1].rsplit(" ", 1)[0] if " " in text[:width - 1] else text[:width - 1]
    return cut.rstrip(",;:") + "…"


def pair_words(dataset: str, query_id: str, doc_id: str, queries, documents: Mapping[str, Any]) -> str:
    """A pair in a scholar's terms, for messages: ``BG 2.47 for “Whom should one serve…”``."""
    address, text = describe_pair(dataset, query_id, doc_id, queries, documents, 60)
    return f"{address} for “{text}”"


def is_pali(documents: Mapping[str, Any], sample: int = 20) -> bool:
    """Whether a dataset's documents are Pali (the originals of its first ``sample`` documents)."""
    for i, doc in enumerate(documents.values()):
        if i >= sample:
            break
        if any(t.field == "root" and t.language == "pi" for t in doc.texts):
            return True
    return False


#: The font stack of the judging pages' texts: Streamlit's own font first (Latin script), then fonts
#: that have Devanagari, common on Windows (Nirmala UI, Mangal), macOS and iOS (Kohinoor Devanagari,
#: Devanagari Sangam MN), Android and Linux (Noto, Lohit, Gargi). The dashboard serves Noto Sans
#: Devanagari itself (:data:`DEVANAGARI_FONT_FACE`), so a machine with none of these still draws them.
DEVANAGARI_FONTS = ('"Source Sans", "Source Sans Pro", "Noto Sans Devanagari", "Noto Serif Devanagari", '
                    '"Nirmala UI", "Mangal", "Kohinoor Devanagari", "Devanagari Sangam MN", "Lohit Devanagari", '
                    '"Gargi", "Annapurna SIL", sans-serif')


#: The Devanagari subset of Noto Sans Devanagari (variable weight, SIL Open Font License 1.1, from
#: ``@fontsource-variable/noto-sans-devanagari`` 5.3.0; the licence is beside it), shipped in
#: ``dashboards/static/fonts/`` and served by the dashboard itself at ``/app/static/`` (Streamlit's
#: ``server.enableStaticServing``, which ``workbench dashboard`` turns on): no CDN, and the reader's
#: machine needs no Devanagari font. The address is relative to the page's, so it also holds under a
#: ``server.baseUrlPath``; ``unicode-range`` keeps Latin text in Streamlit's font.
DEVANAGARI_FONT_FILE = "fonts/NotoSansDevanagari-devanagari-wght.woff2"
DEVANAGARI_FONT_FACE = (
    '@font-face { font-family: "Noto Sans Devanagari"; font-style: normal; font-weight: 100 900; '
    f'font-display: swap; src: url("app/static/{DEVANAGARI_FONT_FILE}") format("woff2-variations"), '
    f'url("app/static/{DEVANAGARI_FONT_FILE}") format("woff2"); '
    "unicode-range: U+0900-097F, U+1CD0-1CF9, U+200C-200D, U+20A8, U+20B9, U+20F0, U+25CC, U+A830-A839, "
    "U+A8E0-A8FF, U+11B00-11B09; }")


#: Streamlit's own font families (its bundled variable faces, weight 100–900, upright and italic): every
#: element of its pages draws in one of them — labels, inputs, select boxes and their option lists, lists,
#: captions, ``st.html`` blocks, and the data grids it draws on a canvas.
STREAMLIT_FONTS = ("Source Sans", "Source Serif", "Source Code Pro")


def _devanagari_in(family: str, style: str) -> str:
    """An ``@font-face`` that adds the served Devanagari (:data:`DEVANAGARI_FONT_FACE`'s file and range) to
    ``family`` (one of :data:`STREAMLIT_FONTS`): the same weight and style as Streamlit's own face, so the
    browser joins them into one font whose Devanagari characters come from Noto Sans Devanagari."""
    return DEVANAGARI_FONT_FACE.replace('"Noto Sans Devanagari"', f'"{family}"').replace(
        "font-style: normal", f"font-style: {style}")


def page_css() -> str:
    """The judging pages' style: the served Devanagari font (:data:`DEVANAGARI_FONT_FACE`), also joined to
    Streamlit's own font families for the Devanagari range (:data:`STREAMLIT_FONTS`), so that every element
    of the page — the guideline box, tables (the canvas-drawn grids too), the "Pair" box and its options,
    lists — draws Devanagari on a machine that has no Devanagari font; the Devanagari-capable font stack
    for texts and the query; and each grade button's colour (:data:`GRADE_COLOURS`) on the Judge and
    Adjudicate pages' buttons, found by their widget keys' CSS classes (``st-key-judge_g1_…``, ``st-key-adj_g1_…``)."""
    rules = [DEVANAGARI_FONT_FACE, *(_devanagari_in(f, style) for f in STREAMLIT_FONTS for style in ("normal", "italic")),
             f".wb-judge-text, .wb-judge-query {{ font-family: {DEVANAGARI_FONTS}; }}"]
    for grade, (bg, fg) in GRADE_COLOURS.items():
        sel = f'[class*="st-key-judge_g{grade}_"] button, [class*="st-key-adj_g{grade}_"] button'
        rules.append(f"{sel} {{ background-color: {bg}; border-color: {bg}; color: {fg}; }}")
        rules.append(f'{sel.replace(" button", " button:hover")}, {sel.replace(" button", " button:focus")}, '
                     f'{sel.replace(" button", " button:active")} {{ background-color: {bg}; border-color: {bg}; '
                     f'filter: brightness(1.12); color: {fg}; }}')  # never Streamlit's red hover: a grade has one colour
    return "<style>\n" + "\n".join(rules) + "\n</style>"


def query_html(view: PairView, size: str = "1.45rem") -> str:
    """The query text as a block of HTML, with its ``lang`` tag (:attr:`PairView.query_lang`)."""
    lang = f' lang="{html.escape(view.query_lang)}"' if view.query_lang else ""
    text = html.escape(view.query_text) or "(this query is not in the current build)"
    return (f'<div class="wb-judge-query"{lang} style="font-size: {size}; font-weight: 600; line-height: 1.4">'
            f'{text}</div>')


def text_html(block_html: str, language: str = "") -> str:
    """One text as a block of HTML with its ``lang`` tag: line breaks kept, marks highlighted, long texts scroll."""
    lang = f' lang="{html.escape(language)}"' if language else ""
    return (f'<div class="wb-judge-text"{lang} style="white-space: pre-wrap; font-size: 1.05rem; line-height: 1.65; '
            f'max-height: 32rem; overflow-y: auto">{block_html}</div>')


def section_html(entries: Sequence[TextEntry]) -> str:
    """One section's texts as HTML: each text under its label (translator, scheme), in its own ``lang``."""
    parts = []
    for e in entries:
        if e.label:
            parts.append(f'<div class="wb-judge-label" style="font-size: 0.85rem; opacity: 0.7; margin-top: 0.6rem">'
                         f'{html.escape(e.label)}</div>')
        parts.append(text_html(e.text, e.lang))
    return "".join(parts)


def grade_text(grade: int | None, cannot_judge: bool = False) -> str:
    """``2 · highly relevant``, ``cannot judge``… for tables."""
    from workbench.judging.store import GRADES

    if cannot_judge or grade is None:
        return "cannot judge"
    return f"{grade} · {GRADES.get(int(grade), '?')}"


def when(ts) -> str:
    """A store timestamp for a table: ``2026-11-30 19:17 UTC`` (empty when missing)."""
    if ts is None:
        return ""
    import datetime as _dt

    if isinstance(ts, _dt.datetime) and ts.tzinfo is not None:
        ts = ts.astimezone(_dt.UTC)
    return ts.strftime("%Y-%m-%d %H:%M UTC") if hasattr(ts, "strftime") else str(ts)


def progress_text(done: int, total: int) -> tuple[float, str]:
    """The progress bar's fraction and label for ``done`` of ``total`` pairs judged."""
    if total <= 0:
        return 0.0, "nothing to judge yet"
    return min(done / total, 1.0), f"{done} of {total} judged ({total - done} left)"


# ---------------------------------------------------------------- the drill-down's send-to-pool


def unjudged_docs(ranked: Iterable[Sequence[str]], labelled: Mapping[str, int]) -> list[str]:
    """The documents of the shown ranked lists (each a sequence of doc ids, best first) that have no
    label in ``labelled`` (the query's qrels), interleaved by rank and without repeats."""
    lists = [list(r) for r in ranked]
    out: list[str] = []
    for i in range(max((len(r) for r in lists), default=0)):
        for r in lists:
            if i < len(r) and r[i] not in labelled and r[i] not in out:
                out.append(r[i])
    return out


def send_to_pool(store, dataset: str, query_id: str, doc_ids: Sequence[str], *, raters_per_pair: int = 2,
                 params: dict | None = None) -> tuple[int | None, int]:
    """Pool ``(query_id, doc)`` for each document not pooled or judged yet (reason ``sent``).

    Returns:
        ``(pool_id, pairs added)``; ``(None, 0)`` when every pair is already pooled or judged
        (no empty pool is made).

    Raises:
        JudgeError: ``raters_per_pair`` outside 1..10 (from the store).
    """
    from workbench.judging.store import PoolPair

    taken = store.pooled_pairs(dataset) | store.judged_pairs(dataset)
    fresh = [d for d in dict.fromkeys(doc_ids) if (query_id, d) not in taken]
    if not fresh:
        return None, 0
    pairs = [PoolPair(query_id, d, tier=0, priority=float(len(fresh) - i), reason="sent") for i, d in enumerate(fresh)]
    pool_id = store.create_pool(dataset, pairs, raters_per_pair=raters_per_pair,
                                params={"sent_from": "dashboard query drill-down", **(params or {})})
    return pool_id, len(fresh)


def damage_html(dataset: str, doc_id: str, home=None) -> str:
    """The known damage in the source texts of one document (:func:`workbench.data.damage.known_damage`,
    e.g. a translation that lost the letters "qu"), as a short note for the judging pages, so a scholar
    does not grade a document down for the source's fault; ``""`` when none is known (or the dataset
    has no damage report). Never raises for a missing or unreadable report."""
    from workbench.data import damage

    note = damage.damage_note(damage.known_damage(dataset, doc_id, home=home))
    return (f'<div class="wb-damage-note" style="font-size: 0.9rem; opacity: 0.8; margin: 0.2rem 0 0.4rem 0">'
            f'{html.escape(note)}</div>') if note else ""
