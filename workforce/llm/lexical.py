"""``embedded/lexical``: an evaluation model with no network (spec
"Routing a mailbox").

It picks the choice whose description best matches the text by term weighting: BM25
(Okapi, with the always-positive idf of BM25+) over the choices' descriptions, each
choice one document (its description and the last part of its value, so
``support.devices`` also says "devices"). Words are lowercased, common English words
dropped and the rest stemmed (Snowball, English), so "printers" meets "printer" and
"charging" meets "charge".

What it reads: the call's ``focus`` (the post) first. When the post alone picks no
choice, the last ``CONTEXT_LINES`` entries of ``context`` (the recent lines) join it at
``CONTEXT_WEIGHT``, newest weighing most, so a follow-up such as "it fails right after
that" can still find the member the earlier lines were about, while a post that says
what it is about is never pulled elsewhere by them. It answers ``none`` when the best
score is below ``threshold`` or ties the second best: the fallback then takes the post.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from functools import lru_cache

from .evaluation import EvaluationCall, Verdict

DEFAULT_THRESHOLD = 0.6
CONTEXT_WEIGHT = 0.7
CONTEXT_LINES = 4
K1 = 1.2
B = 0.5

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any anyone anything are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
    each else etc even ever every few for from further get gets getting got had hadn't has hasn't have haven't having he
    her here hers herself him himself his how however i i'd i'll i'm i've if in into is isn't it it's its itself just
    let's like may me might mine more most much must my myself need needs no nor not now of off on once one only or
    other others our ours ourselves out over own please same shall she should shouldn't since so some someone something
    still such than thank thanks that that's the their theirs them themselves then there there's these they they're
    this those though through to too under until up upon us very via was wasn't we we're we've were weren't what
    what's when where which while who whom whose why will with within without won't would wouldn't yes yet you you'd
    you'll you're you've your yours yourself yourselves hi hello hey help anybody somebody today yesterday really
    question questions thing things way
    """.split()
)

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_HYPHENATED = re.compile(r"\b([a-z0-9]+)-([a-z0-9]+)\b")


@lru_cache(maxsize=1)
def _stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


# Stemming time grows with the square of a word's length, so a post of one 2 MB "word"
# would hold a task worker for minutes. Only the head of a long text is weighed, and no
# real word is longer than this.
MAX_TERM_TEXT = 8_000
MAX_WORD = 40


def terms(text: str) -> list[str]:
    """The terms of ``text`` (its first 8,000 characters): lowercased words of at most 40
    letters without common English words, stemmed. A hyphenated word also counts joined
    (``wi-fi`` gives ``wi``, ``fi`` and ``wifi``)."""
    lowered = text[:MAX_TERM_TEXT].lower().replace("’", "'")
    joined = [a + b for a, b in _HYPHENATED.findall(lowered)]
    words = _WORD.findall(lowered) + joined
    return [_stem(w.replace("'", "")) for w in words if w not in STOPWORDS and 1 < len(w) <= MAX_WORD]


class LexicalEvaluationModel:
    """``embedded/lexical``: see the module docstring.

    Args:
        threshold: the lowest BM25 score that picks a choice (default 0.6: about one
            distinctive word in common with a short description).
    """

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, model_id: str = "embedded/lexical"):
        self.threshold = threshold
        self.model_id = model_id

    def scores(self, call: EvaluationCall, *, with_context: bool = True) -> dict[str, float]:
        """Each offered value's score for ``call`` (0 for no words in common): the
        focus's terms, plus (``with_context``) the recent context's at lower weight."""
        choices = call.question.choices
        if not choices:
            return {}
        docs = [Counter(terms(f"{c.description} {c.value.rpartition('.')[2]}")) for c in choices]
        lengths = [sum(d.values()) for d in docs]
        average = (sum(lengths) / len(lengths)) or 1.0
        n = len(docs)
        frequency: Counter = Counter()
        for doc in docs:
            frequency.update(doc.keys())
        query: defaultdict[str, float] = defaultdict(float)  # a term's weight: 1 per use in the focus, less in context
        for term in terms(call.focus):
            query[term] += 1.0
        if with_context:
            recent = [text for text in call.context if text][-CONTEXT_LINES:]
            for age, text in enumerate(reversed(recent)):
                weight = CONTEXT_WEIGHT / (age + 1)
                for term in set(terms(text)):
                    query[term] += weight
        result = {}
        for choice, doc, length in zip(choices, docs, lengths, strict=True):
            score = 0.0
            for term, weight in query.items():
                tf = doc.get(term, 0)
                if not tf:
                    continue
                idf = math.log(1 + (n - frequency[term] + 0.5) / (frequency[term] + 0.5))
                score += weight * idf * (tf * (K1 + 1)) / (tf + K1 * (1 - B + B * length / average))
            result[choice.value] = score
        return result

    def evaluate(self, call: EvaluationCall) -> dict[str, Verdict]:
        """``{question name: Verdict}``: the choice the focus (the post) picks on its own
        when it clears the threshold; otherwise the choice the focus and the recent
        context pick together; none when neither clears the threshold untied. Never
        raises for a well-formed call."""
        name = call.question.name
        verdict = self._pick(self.scores(call, with_context=False))
        if verdict.type == "none" and call.context:
            verdict = self._pick(self.scores(call, with_context=True))
        return {name: verdict}

    def _pick(self, scores: dict[str, float]) -> Verdict:
        ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
        if not ranked:
            return Verdict.none(0.0)
        best, score = ranked[0]
        runner_up = ranked[1][1] if len(ranked) > 1 else -1.0
        if score < self.threshold or math.isclose(score, runner_up):
            return Verdict.none(score)
        return Verdict.choose(best, score)
