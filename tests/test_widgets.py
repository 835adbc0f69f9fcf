import re

import pytest

from jobqueue.teaching import widgets
from jobqueue.teaching.explore import STRATEGIES, explore_backoff

PNG = b"\x89PNG"
VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def explorer() -> widgets.BackoffExplorer:
    """One explorer with the default settings, for the tests that only look (a redraw costs ~0.3 s)."""
    return widgets.BackoffExplorer()


def test_explorer_starts_with_the_summary_of_its_settings(explorer: widgets.BackoffExplorer) -> None:
    expected = explore_backoff(1, 60, "equal").summary
    assert explorer.summary == expected
    assert explorer.summary_label.value == expected  # no character in it needs escaping
    assert bytes(explorer.picture.value).startswith(PNG)


def test_plain_text_form_is_the_short_summary_and_the_model_id_is_counted(
    explorer: widgets.BackoffExplorer,
) -> None:
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == explorer.summary
    match = re.fullmatch(r"jobqueue-backoff-explorer-(\d+)", bundle[VIEW]["model_id"])
    assert match is not None
    other = widgets.BackoffExplorer(strategy="none")
    later = int(match.group(1)) + 1
    assert other._repr_mimebundle_()[VIEW]["model_id"] == f"jobqueue-backoff-explorer-{later}"
    assert other._repr_mimebundle_()["text/plain"].startswith(
        "no jitter, base 1 s, cap 60 s: attempt 5 waits 16 s;"
    )
    assert repr(other) == f"BackoffExplorer({other.summary!r})"


def test_controls_carry_stable_descriptions_and_css_classes(explorer: widgets.BackoffExplorer) -> None:
    assert explorer.base_s.description == "base_s"
    assert explorer.cap_s.description == "cap_s"
    assert explorer.strategy.description == "strategy"
    assert [value for _, value in explorer.strategy.options] == list(STRATEGIES)
    classes = {
        "backoff-explorer": explorer.box,
        "backoff-base-s": explorer.base_s,
        "backoff-cap-s": explorer.cap_s,
        "backoff-strategy": explorer.strategy,
        "backoff-summary": explorer.summary_label,
        "backoff-picture": explorer.picture,
    }
    for css_class, widget in classes.items():
        assert css_class in widget._dom_classes


def test_moving_a_control_recomputes_summary_and_picture() -> None:
    explorer = widgets.BackoffExplorer(cap_s=30)
    before, picture = explorer.summary, explorer.picture.value
    explorer.base_s.value = 2.0
    assert explorer.summary == explore_backoff(2, 30, "equal").summary != before
    assert explorer.picture.value != picture
    explorer.strategy.value = "full"
    assert explorer.summary.startswith("full jitter, base 2 s, cap 30 s: attempt 5 waits 0-30 s")
    assert explorer.summary == explore_backoff(2, 30, "full").summary
    assert explorer.summary_label.value == explorer.summary


def test_every_slider_setting_is_a_valid_backoff() -> None:
    base_low, base_high, _ = widgets.BASE_S_RANGE
    cap_low, _, _ = widgets.CAP_S_RANGE
    assert base_low > 0 and base_high <= cap_low


def test_an_invalid_setting_is_reported_in_the_summary() -> None:
    explorer = widgets.BackoffExplorer(base_s=5.0)
    explorer.cap_s.min = 1.0
    explorer.cap_s.value = 2.0
    assert explorer.summary.startswith("cannot explore: backoff cap_s must be finite and >= base_s (5.0 s)")
    assert "cannot explore" in explorer.summary_label.value
