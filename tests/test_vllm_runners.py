"""`vllm/runners.py` picks the model runner and the drafter by what vLLM has, not by its version
(stand-ins, no vLLM): `use_v2_model_runner` where the config has it, else V2 exactly when V1 is gone."""

from __future__ import annotations

import pytest

from eagle_convert.vllm import runners


class _Config:
    def __init__(self, v2: bool | None = None, raises: bool = False) -> None:
        self._v2, self._raises = v2, raises

    @property
    def use_v2_model_runner(self) -> bool:  # vLLM 0.29-0.33 VllmConfig
        if self._raises:
            raise ValueError("HiSparse requires Model Runner V2")
        return bool(self._v2)


class _Config034:  # vLLM 0.34.0: the property is gone with V1
    pass


@pytest.mark.parametrize(
    "vc, v1_present, kind",
    [
        (_Config(v2=True), True, "v2"),
        (_Config(v2=False), True, "v1"),
        (_Config(raises=True), True, "v1"),
        (_Config034(), False, "v2"),
        (_Config034(), True, "v1"),  # before the property existed V1 was the only runner
    ],
)
def test_runner_kind_follows_the_config_then_what_exists(
    monkeypatch: pytest.MonkeyPatch, vc: object, v1_present: bool, kind: str
) -> None:
    monkeypatch.setattr(runners, "has_v1_runner", lambda: v1_present)
    assert runners.runner_kind(vc) == kind


def test_the_drafter_is_the_v2_speculator_or_the_v1_proposer_with_its_unwrapped_model() -> None:
    inner = object()
    wrapped = type("Wrapper", (), {"unwrap": lambda self: inner})()
    spec = type("Speculator", (), {"model": wrapped})()
    prop = type("Proposer", (), {"model": inner})()
    assert runners.draft_owner(type("V2", (), {"speculator": spec})()) == ("v2", spec, inner)
    assert runners.draft_owner(type("V1", (), {"drafter": prop})()) == ("v1", prop, inner)
    with pytest.raises(RuntimeError, match=r"^NgramRunner has no EAGLE drafter with a draft model"):
        runners.draft_owner(type("NgramRunner", (), {"drafter": object()})())
