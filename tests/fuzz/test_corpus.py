"""The atheris seed corpus (``record_corpus.py``: real clients' conversations) passes the harness.

Each file is an input as ``atheris_fuzz.one_input`` reads it (no prefix, a split point, the
client's bytes); fed to a fresh broker it must end as the harness demands (see ``fuzz_harness``).
"""

from __future__ import annotations

import pathlib

import pytest
from fuzz_harness import check, fresh_broker, run_input

CORPUS = sorted((pathlib.Path(__file__).parent / "corpus").iterdir())


def test_the_corpus_has_proton_and_rhea_conversations() -> None:
    names = {path.name.split("-")[0] for path in CORPUS}
    assert {"proton", "rhea"} <= names


@pytest.mark.parametrize("path", CORPUS, ids=[path.name for path in CORPUS])
def test_a_recorded_conversation_passes_the_harness(path: pathlib.Path) -> None:
    data = path.read_bytes()
    assert data[0] == 3  # the harness's empty prefix: the conversation brings its own headers
    payload = data[3:]
    assert payload.startswith(b"AMQP")
    cut = int.from_bytes(data[1:3], "big") % (len(payload) + 1)
    broker = fresh_broker()
    check(broker, run_input(broker, [payload[:cut], payload[cut:]]))
