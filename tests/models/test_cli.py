"""``tilelab generate``: its arguments, its errors (one line, exit status 2) and, with the
engine, end-to-end decoding of a tiny checkpoint."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from tilelab.cli import main as tilelab_main
from tilelab.models.cli import parse_ids
from tilelab.models.errors import GenerateInputError


def generate(capsys, *args):
    """Run ``tilelab generate ARGS``; (exit status, stdout, stderr)."""
    status = tilelab_main(["generate", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def error_line(capsys, *args) -> str:
    status, out, err = generate(capsys, *args)
    assert status == 2 and out == "", (status, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tilelab generate: error: "), err
    return lines[0]


@pytest.mark.parametrize("text, ids", [("1,2,3", [1, 2, 3]), (" 7 , 0", [7, 0]), ("5", [5])])
def test_parse_ids(text, ids):
    assert parse_ids(text, vocab_size=300) == ids


@pytest.mark.parametrize("text, fragment", [
    ("", "--ids is empty"), ("1,,2", "--ids: '' is not a token id"),
    ("1,-2", "--ids: '-2' is not a token id"), ("1.5", "'1.5' is not a token id"),
    ("1,300", "token id 300 is outside the vocabulary (vocab_size 300: ids 0 to 299)"),
])
def test_parse_ids_errors(text, fragment):
    with pytest.raises(GenerateInputError) as info:
        parse_ids(text, vocab_size=300)
    assert fragment in str(info.value)


def test_missing_model_directory(capsys, tmp_path):
    line = error_line(capsys, "--model", tmp_path / "none", "--ids", "1", "--max-new-tokens", 2)
    assert f"{tmp_path / 'none'}: does not exist" in line


def test_checkpoint_errors_are_one_line(capsys, tiny_qwen3, tmp_path):
    path = tmp_path / "llama"
    shutil.copytree(tiny_qwen3, path)
    config = json.loads((path / "config.json").read_text())
    config["model_type"] = "llama"
    (path / "config.json").write_text(json.dumps(config))
    line = error_line(capsys, "--model", path, "--ids", "1", "--max-new-tokens", 2)
    assert "config.json: model_type is 'llama', not 'qwen3' (hint: tilelab.models loads " \
           "Qwen3 checkpoints (Qwen3ForCausalLM) only)" in line


@pytest.mark.parametrize("args, fragment", [
    (["--ids", "1,x", "--max-new-tokens", 2], "--ids: 'x' is not a token id"),
    (["--ids", "1,300", "--max-new-tokens", 2], "token id 300 is outside the vocabulary"),
    (["--ids", "1", "--max-new-tokens", 0], "--max-new-tokens must be at least 1, not 0"),
    (["--ids", "1", "--max-new-tokens", 2, "--temperature", -1],
     "--temperature must be 0 (greedy) or positive, not -1.0"),
    (["--ids", "1", "--max-new-tokens", 512], "1 prompt tokens + 512 new tokens exceed the "
                                               "model's 512 positions"),
    (["--prompt", "", "--max-new-tokens", 2], "--prompt '' encodes to no tokens"),
])
def test_input_errors(capsys, tiny_qwen3, args, fragment):
    line = error_line(capsys, "--model", tiny_qwen3, *args)
    assert fragment in line, line


def test_prompt_without_tokenizer(capsys, qwen3_checkpoint_factory):
    path = qwen3_checkpoint_factory()
    line = error_line(capsys, "--model", path, "--prompt", "hello", "--max-new-tokens", 2)
    assert f"--prompt needs a tokenizer, and {path} has no tokenizer.json (hint: pass token " \
           "ids with --ids 1,2,3)" in line


@pytest.mark.parametrize("args, fragment", [
    (["--ids", "1"], "the following arguments are required: --max-new-tokens"),
    (["--max-new-tokens", "2"], "one of the arguments --ids --prompt is required"),
    (["--ids", "1", "--prompt", "hi", "--max-new-tokens", "2"], "not allowed with argument"),
    (["--ids", "1", "--max-new-tokens", "2", "--device", "tpu"], "invalid choice: 'tpu'"),
])
def test_argument_errors_exit_with_status_2(capsys, args, fragment):
    with pytest.raises(SystemExit) as info:
        tilelab_main(["generate", "--model", "m", *args])
    assert info.value.code == 2
    assert fragment in capsys.readouterr().err


def parse_output(out: str) -> dict[str, str]:
    lines = out.splitlines()
    fields = dict(line.split(": ", 1) for line in lines[:-1])
    fields["speed"] = lines[-1]
    return fields


def engine_ids(path, ids, n, **kwargs):
    from tilelab.models import Qwen3

    return Qwen3.from_pretrained(path, device="cpu").generate(ids, max_new_tokens=n, **kwargs)


def test_generate_from_ids_prints_the_engines_tokens_text_and_speed(capsys, tiny_qwen3):
    from tilelab.models.checkpoint import load_checkpoint

    status, out, err = generate(capsys, "--model", tiny_qwen3, "--ids", "5,17,42",
                                "--max-new-tokens", 3, "--device", "cpu")
    assert status == 0, err
    fields = parse_output(out)
    new = [int(t) for t in fields["new ids"].split(",")]
    assert new == engine_ids(tiny_qwen3, [5, 17, 42], 3)
    assert fields["text"] == load_checkpoint(tiny_qwen3).tokenizer.decode(new)
    assert re.fullmatch(r"3 new tokens in \d+\.\d\d s: \d+\.\d tok/s \(prompt of 3 tokens, "
                        r"device cpu\)", fields["speed"]), fields["speed"]


def test_generate_from_a_prompt_encodes_it_with_the_tokenizer(capsys, tiny_qwen3):
    from tilelab.models.checkpoint import load_checkpoint

    prompt = "the quick brown fox"
    ids = load_checkpoint(tiny_qwen3).tokenizer.encode(prompt).ids
    status, out, err = generate(capsys, "--model", tiny_qwen3, "--prompt", prompt,
                                "--max-new-tokens", 2, "--device", "cpu")
    assert status == 0, err
    fields = parse_output(out)
    assert [int(t) for t in fields["new ids"].split(",")] == engine_ids(tiny_qwen3, ids, 2)
    assert f"(prompt of {len(ids)} tokens, device cpu)" in fields["speed"]


def test_sampling_follows_the_seed(capsys, qwen3_checkpoint_factory):
    path = qwen3_checkpoint_factory()   # no tokenizer: no text line
    runs = {}
    for seed in (1, 1, 2):
        status, out, err = generate(capsys, "--model", path, "--ids", "3,4", "--max-new-tokens",
                                    4, "--temperature", 5.0, "--seed", seed, "--device", "cpu")
        assert status == 0, err
        fields = parse_output(out)
        assert "text" not in fields
        runs.setdefault(seed, []).append([int(t) for t in fields["new ids"].split(",")])
    assert runs[1][0] == runs[1][1] == engine_ids(path, [3, 4], 4, temperature=5.0, seed=1)
    assert runs[2][0] == engine_ids(path, [3, 4], 4, temperature=5.0, seed=2)
    assert runs[1][0] != runs[2][0]   # the seed reaches the engine


def test_other_tilelab_errors_exit_with_status_1(capsys, tiny_qwen3, monkeypatch):
    import tilelab as tl
    from tilelab.models import Qwen3

    def no_gpu(*args, **kwargs):
        raise tl.LaunchError("device 'gpu' needs a GPU, but none is usable",
                             hint="use device='cpu'")

    monkeypatch.setattr(Qwen3, "from_pretrained", no_gpu)
    status, out, err = generate(capsys, "--model", tiny_qwen3, "--ids", "1",
                                "--max-new-tokens", 1, "--device", "gpu")
    assert (status, out) == (1, "")
    assert err == ("tilelab generate: error: device 'gpu' needs a GPU, but none is usable "
                   "(hint: use device='cpu')\n")


def test_building_the_parser_does_not_import_models():
    code = ("import sys; from tilelab.cli import build_parser; "
            "build_parser().parse_args(['compile', 'k.py::add']); "
            "print(sorted(m for m in sys.modules if m.startswith('tilelab.models')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_doctests():
    import doctest

    import tilelab.models.cli

    assert doctest.testmod(tilelab.models.cli).failed == 0
