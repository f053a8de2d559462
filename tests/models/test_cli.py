"""``tilelab generate``, ``tilelab chat`` and ``python -m tilelab.models``: their
arguments, their errors (one line, exit status 2) and, with the engine, end-to-end runs
on tiny checkpoints, in process and through a real subprocess (stdin, stdout, stderr,
the exit status)."""
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

from .chat_checkpoints import EOS_MESSAGES, chat_checkpoint  # noqa: F401 (fixture)


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
                                               "KV cache's 512 positions (max_seq_len)"),
    (["--ids", "1,2,3", "--max-new-tokens", 8, "--max-seq-len", 10],
     "3 prompt tokens + 8 new tokens exceed the KV cache's 10 positions (max_seq_len)"),
    (["--prompt", "", "--max-new-tokens", 2], "the prompt '' encodes to no tokens"),
    (["--ids", "1", "--stop", ""], "--stop needs a non-empty text"),
    (["--ids", "1", "--check-every", 0], "--check-every must be at least 1, not 0"),
    (["--ids", "1", "--chat"], "--chat takes a text prompt, not --ids"),
    (["--prompt", "hi", "--chat"], "has no chat template (tokenizer_config.json's "
                                   "chat_template or chat_template.jinja) (hint: drop --chat)"),
    (["--prompt-file", "/nonexistent/p.txt"], "--prompt-file /nonexistent/p.txt: No such file "
                                              "or directory"),
])
def test_input_errors(capsys, tiny_qwen3, args, fragment):
    line = error_line(capsys, "--model", tiny_qwen3, *args)
    assert fragment in line, line


def test_prompt_without_tokenizer(capsys, qwen3_checkpoint_factory):
    path = qwen3_checkpoint_factory()
    line = error_line(capsys, "--model", path, "--prompt", "hello", "--max-new-tokens", 2)
    assert f"a text prompt needs a tokenizer, and {path} has no tokenizer.json (hint: pass " \
           "token ids with --ids 1,2,3)" in line


@pytest.mark.parametrize("args, fragment", [
    (["--ids", "1", "--prompt", "hi", "--max-new-tokens", "2"], "not allowed with argument"),
    (["--prompt", "hi", "--prompt-file", "p.txt"], "not allowed with argument"),
    (["--prompt", "hi", "--think", "--no-think"], "not allowed with argument"),
    (["--ids", "1", "--max-new-tokens", "2", "--device", "tpu"], "invalid choice: 'tpu'"),
])
def test_argument_errors_exit_with_status_2(capsys, args, fragment):
    with pytest.raises(SystemExit) as info:
        tilelab_main(["generate", "--model", "m", *args])
    assert info.value.code == 2
    assert fragment in capsys.readouterr().err


def engine_ids(path, ids, n, **kwargs):
    from tilelab.models import Qwen3

    return Qwen3.from_pretrained(path, device="cpu").generate(ids, max_new_tokens=n, **kwargs)


#: a speed line: a rate with three significant digits, never "0.0 tok/s"
RATE = r"(\d{1,3}(,\d{3})*|\d+\.\d+) tok/s"


def check_report(err: str, *, new: int, prompt: int, reason: str, first_run: bool = True):
    """The report on stderr: what stopped it, load, first run, prefill, decode."""
    lines = err.splitlines()
    assert lines[0] == f"{new} new tokens, stopped by {reason} (device cpu)", err
    assert re.fullmatch(r"load: \d+\.\d{3} s", lines[1]), lines[1]
    rest = lines[2:]
    if first_run:
        assert re.fullmatch(r"first run: \d+\.\d{3} s compiling \(or loading\) the kernels "
                            r"and recording the decode graph, not counted below",
                            rest[0]), rest[0]
        rest = rest[1:]
    assert re.fullmatch(rf"prefill: {prompt} tokens in \d+\.\d{{3}} s: {RATE} \(time to "
                        r"first token \d+\.\d{3} s\)", rest[0]), rest[0]
    if new > 1:
        assert re.fullmatch(rf"decode: \d+ steps in \d+\.\d{{3}} s: {RATE}", rest[1]), rest[1]
    assert "0.0 tok/s" not in err


def test_generate_from_ids_prints_the_text_then_the_report(capsys, tiny_qwen3):
    from tilelab.models.checkpoint import load_checkpoint

    status, out, err = generate(capsys, "--model", tiny_qwen3, "--ids", "5,17,42",
                                "--max-new-tokens", 3, "--device", "cpu")
    assert status == 0, err
    new = engine_ids(tiny_qwen3, [5, 17, 42], 3)
    assert out == load_checkpoint(tiny_qwen3).tokenizer.decode(new) + "\n"   # no raw ids
    check_report(err, new=3, prompt=3, reason="--max-new-tokens")


def test_show_ids_prints_the_ids_after_the_text(capsys, tiny_qwen3):
    status, out, err = generate(capsys, "--model", tiny_qwen3, "--ids", "5,17,42",
                                "--max-new-tokens", 3, "--device", "cpu", "--show-ids",
                                "--no-warmup")
    assert status == 0, err
    new = engine_ids(tiny_qwen3, [5, 17, 42], 3)
    assert out.splitlines()[-1] == f"ids: {','.join(map(str, new))}"
    check_report(err, new=3, prompt=3, reason="--max-new-tokens", first_run=False)


def test_generate_from_a_prompt_encodes_it_with_the_tokenizer(capsys, tiny_qwen3, tmp_path):
    from tilelab.models.checkpoint import load_checkpoint

    prompt = "the quick brown fox"
    tok = load_checkpoint(tiny_qwen3).tokenizer
    ids = tok.encode(prompt).ids
    status, out, err = generate(capsys, "--model", tiny_qwen3, "--prompt", prompt,
                                "--max-new-tokens", 2, "--device", "cpu")
    assert status == 0, err
    assert out == tok.decode(engine_ids(tiny_qwen3, ids, 2)) + "\n"
    check_report(err, new=2, prompt=len(ids), reason="--max-new-tokens")
    file = tmp_path / "prompt.txt"
    file.write_text(prompt)
    status, out2, err = generate(capsys, "--model", tiny_qwen3, "--prompt-file", file,
                                 "--max-new-tokens", 2, "--device", "cpu", "--no-warmup")
    assert (status, out2) == (0, out)


def test_sampling_follows_the_seed(capsys, qwen3_checkpoint_factory):
    path = qwen3_checkpoint_factory()   # no tokenizer: the ids are the output
    runs = {}
    for seed in (1, 1, 2):
        status, out, err = generate(capsys, "--model", path, "--ids", "3,4", "--max-new-tokens",
                                    4, "--temperature", 5.0, "--seed", seed, "--device", "cpu",
                                    "--no-warmup")
        assert status == 0, err
        assert out.startswith("ids: ") and len(out.splitlines()) == 1
        runs.setdefault(seed, []).append([int(t) for t in out[5:].split(",")])
    assert runs[1][0] == runs[1][1] == engine_ids(path, [3, 4], 4, temperature=5.0, seed=1)
    assert runs[2][0] == engine_ids(path, [3, 4], 4, temperature=5.0, seed=2)
    assert runs[1][0] != runs[2][0]   # the seed reaches the engine


def test_a_quantized_checkpoint_is_refused_naming_its_format(capsys, tiny_qwen3, tmp_path):
    path = tmp_path / "fp8"
    shutil.copytree(tiny_qwen3, path)
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    (path / "config.json").write_text(json.dumps(config))
    line = error_line(capsys, "--model", path, "--ids", "1")
    assert line == (f"tilelab generate: error: {path / 'config.json'}: quantization_config"
                    ".quant_method is 'fp8' (FP8 weights with block scales): quantized "
                    "checkpoints are not supported (hint: tilelab.models runs bfloat16, "
                    "float16 or float32 weights: use the unquantized checkpoint (e.g. "
                    "Qwen/Qwen3-0.6B rather than Qwen/Qwen3-0.6B-FP8 or an -AWQ / -GPTQ "
                    "variant))")


def test_a_hub_id_says_how_to_download_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)
    line = error_line(capsys, "--model", "Qwen/Qwen3-0.6B", "--prompt", "hi")
    assert line == ("tilelab generate: error: Qwen/Qwen3-0.6B: does not exist locally "
                    "(tilelab.models reads checkpoint directories; it does not download) "
                    "(hint: if 'Qwen/Qwen3-0.6B' is a Hugging Face hub id, download it with "
                    "`huggingface-cli download Qwen/Qwen3-0.6B --local-dir "
                    "checkpoints/Qwen3-0.6B` and pass checkpoints/Qwen3-0.6B)")


def test_a_hub_id_in_the_local_cache_loads(capsys, monkeypatch, tmp_path, tiny_qwen3):
    snapshot = tmp_path / "hub" / "models--Qwen--Tiny" / "snapshots" / "abc123"
    shutil.copytree(tiny_qwen3, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    status, out, err = generate(capsys, "--model", "Qwen/Tiny", "--ids", "5,17,42",
                                "--max-new-tokens", 2, "--device", "cpu", "--no-warmup",
                                "--show-ids")
    assert status == 0, err
    assert out.splitlines()[-1] == \
        f"ids: {','.join(map(str, engine_ids(tiny_qwen3, [5, 17, 42], 2)))}"


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


@pytest.mark.subprocess
def test_building_the_parser_does_not_import_the_engine():
    """The generate and chat arguments come from tilelab.models.cli, which imports only
    argparse and the error types: building the parser loads no kernel and no engine."""
    code = ("import sys; from tilelab.cli import build_parser; "
            "build_parser().parse_args(['compile', 'k.py::add']); "
            "print(sorted(m for m in sys.modules if m.startswith('tilelab.models') "
            "or m.startswith('tilelab.kernels') or m.startswith('tilelab.runtime')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == \
        "['tilelab.models', 'tilelab.models.cli', 'tilelab.models.errors']"


# ---------------------------------------------------------------- through a subprocess

def run_cli(*args, stdin: str = "", module: str = "tilelab.models", timeout: int = 600):
    """``python -m MODULE ARGS`` with ``stdin``; the completed process."""
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=timeout,
                          env={**__import__("os").environ, "TILELAB_BACKEND": "cpu"})


@pytest.mark.subprocess
def test_python_m_tilelab_models_reads_the_prompt_from_stdin(tiny_qwen3):
    from tilelab.models.checkpoint import load_checkpoint

    prompt = "the quick brown fox"
    r = run_cli("generate", "--model", tiny_qwen3, "--max-new-tokens", 3, "--no-warmup",
                stdin=prompt)
    assert r.returncode == 0, r.stderr
    tok = load_checkpoint(tiny_qwen3).tokenizer
    assert r.stdout == tok.decode(engine_ids(tiny_qwen3, tok.encode(prompt).ids, 3)) + "\n"
    check_report(r.stderr, new=3, prompt=len(tok.encode(prompt).ids),
                 reason="--max-new-tokens", first_run=False)


@pytest.mark.subprocess
def test_generate_stops_at_the_checkpoints_eos_unless_told(chat_checkpoint):
    from tilelab.models import Qwen3

    model = Qwen3.from_pretrained(chat_checkpoint, device="cpu", max_seq_len=96)
    want = model.chat(EOS_MESSAGES, enable_thinking=False, max_new_tokens=12)
    ids = model.encode(model.chat_template.render(EOS_MESSAGES, add_generation_prompt=True,
                                                  enable_thinking=False))
    stopped = model.generate(ids, 12)
    args = ("generate", "--model", chat_checkpoint, "--chat", "--system", "Be brief.",
            "--no-think", "--max-new-tokens", 12, "--show-ids")
    r = run_cli(*args, stdin=EOS_MESSAGES[1]["content"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{want}\nids: {','.join(map(str, stopped))}\n"
    check_report(r.stderr, new=len(stopped), prompt=len(ids),
                 reason="an end-of-sequence token")
    r = run_cli(*args, "--ignore-eos", stdin=EOS_MESSAGES[1]["content"], module="tilelab")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("12 new tokens, stopped by --max-new-tokens")


@pytest.mark.subprocess
def test_tilelab_chat_is_a_multi_turn_session(chat_checkpoint):
    from tilelab.models import Qwen3

    model = Qwen3.from_pretrained(chat_checkpoint, device="cpu", max_seq_len=256)
    session = model.session(system="Be brief.", enable_thinking=False, max_new_tokens=6)
    replies = [session.send("hello world from tilelab"), session.send("what is a tile")]
    r = run_cli("chat", "--model", chat_checkpoint, "--system", "Be brief.", "--no-think",
                "--max-new-tokens", 6, "--max-seq-len", 256, "--no-warmup",
                stdin="hello world from tilelab\nwhat is a tile\n/exit\nnever read\n",
                module="tilelab")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(f"{t}\n" for t in replies)
    summaries = [ln for ln in r.stderr.splitlines() if ln.startswith("[")]
    assert len(summaries) == 2
    first, second = (re.search(r"prefill (\d+) tokens \((\d+) cached\)", s).groups()
                     for s in summaries)
    assert first[1] == "0" and int(second[1]) > 0       # the second turn reused the cache
    assert "context 256 tokens" in r.stderr.splitlines()[0]


@pytest.mark.subprocess
def test_tilelab_chat_survives_a_turn_past_the_context(chat_checkpoint):
    r = run_cli("chat", "--model", chat_checkpoint, "--max-new-tokens", 4, "--max-seq-len",
                40, "--no-warmup", "--no-think",
                stdin="the quick brown fox jumps over the lazy dog twice over\nhi\n")
    assert r.returncode == 0, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and "exceed the KV cache's 40 positions (max_seq_len)" in errors[0]
    assert len(r.stdout.splitlines()) == 1               # the second message was answered


@pytest.mark.subprocess
def test_tilelab_chat_refuses_a_model_without_a_template(tiny_qwen3):
    r = run_cli("chat", "--model", tiny_qwen3, module="tilelab")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"tilelab chat: error: {tiny_qwen3} has no chat template "
                        "(tokenizer_config.json's chat_template or chat_template.jinja) "
                        "(hint: generate from token ids or text instead: "
                        "model.generate(...))\n")


def test_doctests():
    import doctest

    import tilelab.models.__main__
    import tilelab.models.cli
    import tilelab.models.cli_chat

    assert doctest.testmod(tilelab.models.cli).failed == 0
    assert doctest.testmod(tilelab.models.cli_chat).failed == 0
    assert doctest.testmod(tilelab.models.__main__).failed == 0
