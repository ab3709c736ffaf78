"""Canonical keys (SPEC §1): NFKC, case-folded, the letters, marks and numbers of every script
kept, every run of anything else one ``_``."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.domain import normalize_key
from memory.domain.model import _normalize_key_memo


@pytest.mark.parametrize(("raw", "key"), [
    ("電話 1", "電話_1"), ("住所 1", "住所_1"), ("密码2", "密码2"), ("ключ2", "ключ2"),
    ("пароль", "пароль"), ("Пароль", "пароль"), ("مفتاح الباب", "مفتاح_الباب"),
    ("कि", "कि"), ("का", "का"), ("favourite 🍕 food", "favourite_food"),
    ("🍕pizza🍕", "pizza"), ("Home City", "home_city"), ("best 5k time", "best_5k_time"),
    ("  x -- y__z!! ", "x_y_z"), ("ＡＢＣ１", "abc1"), ("Straße", "strasse"), ("x²", "x2"),
    ("Café", "café"), ("Cafe\u0301", "café"), ("①", "1"),
])
def test_keys_keep_every_script(raw: str, key: str) -> None:
    assert normalize_key(raw) == key


@pytest.mark.parametrize("raw", ["", "   ", "🍕", "!!!", "—", "_ _", "✓✓", "\u200b"])
def test_a_key_with_nothing_left_is_empty(raw: str) -> None:
    assert normalize_key(raw) == ""


def test_keys_that_collided_before_stay_apart() -> None:
    assert len({normalize_key(k) for k in ("電話 1", "住所 1", "1")}) == 3
    assert normalize_key("密码2") != normalize_key("ключ2")
    assert normalize_key("कि") != normalize_key("का")  # the vowel signs are marks, kept


def _old(raw: str) -> str:
    folded = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^0-9a-z]+", "_", folded).strip("_")


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_canonical_keys_are_a_fixed_point_of_letters_marks_numbers_and_single_underscores(
        raw: str) -> None:
    key = normalize_key(raw)
    assert normalize_key(key) == key
    assert not key.startswith("_") and not key.endswith("_") and "__" not in key
    assert all(ch == "_" or unicodedata.category(ch)[0] in "LMN" for ch in key)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_ascii_keys_are_what_they_were(raw: str) -> None:
    """Every key the service stored before keeps its name."""
    assert normalize_key(raw) == _old(raw)
    assert normalize_key(_old(raw)) == _old(raw)


def test_long_keys_are_not_memoised() -> None:
    before = _normalize_key_memo.cache_info().currsize
    assert normalize_key("k" * 10_000 + " x") == "k" * 10_000 + "_x"
    assert _normalize_key_memo.cache_info().currsize == before
