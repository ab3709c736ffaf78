"""The redaction core (SPEC §6), no database: folding is at least as coarse as the service's
value equality, matches are replaced in the original text and nothing else changes, parsed
JSON changes in string values only."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.domain import normalize_value
from memory.domain.redact import Redactor, fold

WIDE = {c: chr(ord(c) + 0xFEE0) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"}


def widen(text: str) -> str:
    return "".join(WIDE.get(c, c) for c in text)


variants = st.sampled_from([str.upper, str.lower, str.casefold, widen,
                            lambda t: unicodedata.normalize("NFD", t),
                            lambda t: unicodedata.normalize("NFKC", t),
                            lambda t: "  " + t.replace(" ", " \n\t") + " "])
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
                min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(text=texts, variant=variants)
def test_what_the_service_calls_equal_folds_equal(text: str, variant) -> None:
    other = variant(text)
    if normalize_value(text) == normalize_value(other):
        assert fold(text) == fold(other)


@settings(max_examples=200, deadline=None)
@given(value=st.text(alphabet="abcXYZ129-", min_size=3, max_size=8), variant=variants,
       left=st.text(alphabet=" ,;:!?()", max_size=4), right=st.text(alphabet=" ,;:!?()",
                                                                     max_size=4))
def test_a_variant_in_context_is_replaced_and_the_context_kept(value, variant, left, right):
    written = variant(value).strip()
    assert Redactor([value]).text(left + written + right) == left + "[erased]" + right


def test_case_width_and_soft_hyphen_variants_are_redacted() -> None:
    r = Redactor(["Zanzibar-4471"])
    assert r.text("code ＺＡＮＺＩＢＡＲ－４４７１ ok") == "code [erased] ok"
    assert r.text("ZANZIBAR-4471 and zan\u00adzibar-4471.") == "[erased] and [erased]."
    assert r.text("xZanzibar-4471y") == "xZanzibar-4471y"  # another token, not the value
    assert r.text("Zanzibar 4471") == "Zanzibar 4471"  # not equal to the value


def test_a_text_shorter_than_the_folded_value_is_still_searched() -> None:
    # "NAÏVE CAFÉ" folds to 12 characters (decomposed accents); "naïve Café" has 10.
    assert Redactor(["NAÏVE CAFÉ"]).text("naïve Café") == "[erased]"
    assert Redactor(["ﬁle"]).text("FILE") == "[erased]"


def test_json_walk_changes_string_values_only() -> None:
    r = Redactor(["value", "4471"])
    data = {"value": "the value", "key": "value", "n": 4471, "ok": True, "none": None,
            "list": ["4471", {"value": ["value"]}]}
    assert r.data(data) == {"value": "the [erased]", "key": "[erased]", "n": 4471, "ok": True,
                            "none": None, "list": ["[erased]", {"value": ["[erased]"]}]}
    untouched = {"value": "Paris", "key": "city"}
    assert r.data(untouched) is untouched  # the same object: nothing to write back


def test_quotes_backslashes_and_separators_are_plain_characters() -> None:
    r = Redactor(['pin "88" b\\x', '": "'])
    assert r.text('my pin "88" b\\x! {"a": "b"}') == 'my [erased]! {"a": "b"}'
    assert r.text('x ": " y') == "x [erased] y"  # a whole token between spaces


def test_short_values_are_redacted_as_whole_words_only() -> None:
    r = Redactor(["e", "12"])
    assert r.text("the e is e-mail 12 and 123") == "the [erased] is [erased]-mail [erased] and 123"


def test_the_marker_never_holds_an_erased_value() -> None:
    assert Redactor(["erased"]).text("erased and ERASED") == "█ and █"
    both = Redactor(["erased", "█"])
    assert both.text("erased █") == " "  # neither marker is safe: the values are deleted


def test_a_value_of_format_characters_only_is_matched_with_them() -> None:
    assert Redactor(["\u200b"]).text("a \u200b b") == "a [erased] b"
    assert Redactor(["\u200b"]).text("a\u200bb") == "a\u200bb"  # inside a token


def test_a_varchar_column_keeps_its_length() -> None:
    r = Redactor(["ab"])
    source = " ".join(["ab"] * 66)  # 197 characters
    assert len(r.text(source)) > 200
    short = r.text(source, max_length=200)
    assert len(short) <= 200 and "ab" not in short


def test_many_values_are_searched_in_one_pass() -> None:
    r = Redactor([f"state {i}" for i in range(20_000)])
    assert r.text("status = state 19999, was state 5") == "status = [erased], was [erased]"


def test_a_value_is_matched_as_a_whole_token_only() -> None:
    r = Redactor(["val1", "rk1"])
    text = "rk1 = val1\nrk10 = val10\nrk11 = val11; rk1_total = 3 (val1)"
    assert r.text(text) == ("[erased] = [erased]\nrk10 = val10\nrk11 = val11;"
                            " rk1_total = 3 ([erased])")
    # Punctuation the value holds continues it: erasing a-b leaves a-b-c whole.
    assert Redactor(["a-b"]).text("a-b-c and a-b.") == "a-b-c and [erased]."
    # A mark continues a token: "cafe" is not the first four letters of "café".
    assert Redactor(["cafe"]).text("café, cafe") == "café, [erased]"


def test_what_a_kept_fact_says_is_never_redacted() -> None:
    r = Redactor(["Lisbon"])
    text = "e1 = Lisbon\ne2 = Lisbon-north\ne3 = LISBON\nwent to Lisbon-south"
    kept = ["e2", "Lisbon-north", "e3", "LISBON"]
    assert r.text(text, keep=kept) == ("e1 = [erased]\ne2 = Lisbon-north\ne3 = LISBON\n"
                                       "went to [erased]-south")


def test_a_fact_of_the_erased_key_goes_whole_and_the_others_stay_as_they_were() -> None:
    r = Redactor(["Lisbon", "META-ALPHA-77", "secret_code"], names={"secret_code"},
                 normalize_key=lambda k: k.lower().replace(" ", "_"))
    facts = [{"key": "Secret Code", "value": "Lisbon", "hard_commit": False,
              "metadata": {"note": "META-ALPHA-77", "n": 7}, "reason": "moved to Lisbon"},
             {"key": "e2", "value": "Lisbon", "metadata": {"note": "META-ALPHA-77"}}]
    keep = r.kept(facts)
    assert keep == ["e2", "Lisbon"]
    assert r.facts(facts, keep) == [
        {"key": "[erased]", "value": "[erased]", "hard_commit": False,
         "reason": "moved to Lisbon"},  # the kept fact's value: a span never redacted
        facts[1]]
    assert r.facts(facts, keep)[1] is facts[1]
