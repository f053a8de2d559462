"""Chat templates rendered as transformers renders them, and chat on the engine.

The acceptance test renders conversations with Qwen3's real chat template (from a
public copy of Qwen3's tokenizer_config.json, in qwen3_chat_template.jinja) and
compares the text with ``tokenizer.apply_chat_template(messages, tokenize=False,
add_generation_prompt=True, enable_thinking=...)`` character for character:
system prompts, multi-turn conversations whose earlier answers carry thinking
(Qwen3's template drops it before the last user turn), ``reasoning_content`` and its
aliases, tools (``tojson`` with non-ASCII text), tool calls and tool responses.
"""
from __future__ import annotations

import json

import pytest

from tilelab.models import Qwen3
from tilelab.models.chat import ChatTemplate, ChatTemplateError
from tilelab.models.errors import GenerateInputError
from tilelab.models.tokenizer_config import read_tokenizer_config

from .chat_checkpoints import (EOS_MESSAGES, IM_END, QWEN3_TEMPLATE,  # noqa: F401
                               chat_checkpoint, eos_prompt)

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Météo d'une ville — °C",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]

CONVERSATIONS = {
    "user": [{"role": "user", "content": "hello world"}],
    "system": [{"role": "system", "content": "Be brief."},
               {"role": "user", "content": "What is a tile?"}],
    "multi-turn with thinking": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is a tile?"},
        {"role": "assistant", "content": "<think>\nA block.\n</think>\n\nA block of a tensor."},
        {"role": "user", "content": "And a partition?"}],
    "answer after the last query keeps its thinking": [
        {"role": "user", "content": "Add 2 and 3."},
        {"role": "assistant", "content": "<think>\n2 + 3\n</think>\n\n5"}],
    "reasoning_content and its aliases": [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2", "thinking": "r2"},
        {"role": "user", "content": "q3"},
        {"role": "assistant", "content": "a3", "reasoning": "r3"}],
    "non-ASCII": [{"role": "user", "content": "Grüße, 世界 🚀"}],
    "tool call and response": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "sunny"}],
}


@pytest.fixture(scope="module")
def hf_tokenizer(chat_checkpoint):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(chat_checkpoint))


@pytest.fixture(scope="module")
def template(chat_checkpoint):
    cfg = read_tokenizer_config(chat_checkpoint)
    return ChatTemplate(cfg.chat_template, cfg.special_tokens, source=cfg.template_file)


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@pytest.mark.parametrize("thinking", [None, True, False])
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_rendering_is_apply_chat_template(hf_tokenizer, template, name, thinking,
                                          generation_prompt):
    messages = CONVERSATIONS[name]
    extra = {} if thinking is None else {"enable_thinking": thinking}
    tools = TOOLS if name.startswith("tool") else None
    want = hf_tokenizer.apply_chat_template(messages, tokenize=False, tools=tools,
                                            add_generation_prompt=generation_prompt, **extra)
    got = template.render(messages, add_generation_prompt=generation_prompt,
                          enable_thinking=thinking, tools=tools)
    assert got == want


def test_tools_render_with_tojson_as_transformers_does(hf_tokenizer, template):
    got = template.render(CONVERSATIONS["user"], tools=TOOLS, add_generation_prompt=True)
    assert got == hf_tokenizer.apply_chat_template(CONVERSATIONS["user"], tools=TOOLS,
                                                   tokenize=False, add_generation_prompt=True)
    assert json.dumps(TOOLS[0], ensure_ascii=False) in got      # non-ASCII kept as is


def test_the_checkpoint_files_give_the_template_and_special_tokens(chat_checkpoint):
    cfg = read_tokenizer_config(chat_checkpoint)
    assert cfg.chat_template == QWEN3_TEMPLATE
    assert cfg.special_tokens == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    assert cfg.template_file == chat_checkpoint / "tokenizer_config.json"


def test_chat_template_jinja_wins_and_named_templates_take_default(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": [{"name": "tool_use", "template": "T"},
                           {"name": "default", "template": "D"}],
         "eos_token": {"content": "<e>", "special": True}}))
    cfg = read_tokenizer_config(tmp_path)
    assert (cfg.chat_template, cfg.special_tokens) == ("D", {"eos_token": "<e>"})
    (tmp_path / "chat_template.jinja").write_text("J{{ eos_token }}")
    cfg = read_tokenizer_config(tmp_path)
    assert cfg.chat_template == "J{{ eos_token }}"
    assert cfg.template_file == tmp_path / "chat_template.jinja"
    assert ChatTemplate(cfg.chat_template, cfg.special_tokens).render([]) == "J<e>"


@pytest.mark.parametrize("content, message", [
    ({"chat_template": 5}, "chat_template must be a string or a list of named templates, "
                           "not int"),
    ({"chat_template": [{"name": "x", "template": "y"}]},
     "chat_template lists templates named ['x'] but none named 'default'"),
    ({"eos_token": 7}, "eos_token must be a string or an object with a 'content' string, "
                       "not 7"),
])
def test_bad_tokenizer_configs_are_located(tmp_path, content, message):
    from tilelab.models.errors import CheckpointError

    (tmp_path / "tokenizer_config.json").write_text(json.dumps(content))
    with pytest.raises(CheckpointError) as info:
        read_tokenizer_config(tmp_path)
    assert info.value.message == f"{tmp_path / 'tokenizer_config.json'}: {message}"


def test_a_template_that_raises_names_its_file_and_message():
    t = ChatTemplate("{% if messages[0].role != 'user' %}{{ raise_exception('Conversations "
                     "must start with a user message') }}{% endif %}", source="ckpt/x.json")
    with pytest.raises(ChatTemplateError) as info:
        t.render([{"role": "assistant", "content": "hi"}])
    assert str(info.value) == ("ckpt/x.json: the chat template refused the conversation: "
                               "Conversations must start with a user message")
    assert isinstance(info.value, GenerateInputError)


def test_templates_run_sandboxed():
    with pytest.raises(ChatTemplateError, match="refused the conversation"):
        ChatTemplate("{{ ''.__class__.__mro__[1].__subclasses__() }}").render([])
    with pytest.raises(ChatTemplateError, match="names starting with '_' are refused"):
        ChatTemplate("{% set ns = namespace(_x=1) %}").render([])
    with pytest.raises(ChatTemplateError, match="refused the conversation"):
        ChatTemplate("{% set _ = messages.append(1) %}").render([])   # immutable inputs
    with pytest.raises(ChatTemplateError, match="does not compile"):
        ChatTemplate("{% for %}")


def test_template_features_templates_use():
    t = ChatTemplate("{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
                     "{{ m.content }}{% endfor %}|{{ dict(a=1)['a'] }}|{{ x | tojson(indent=1) }}"
                     "|{% generation %}g{% endgeneration %}")
    got = t.render([{"role": "user", "content": "1"}, {"role": "user", "content": "2"}],
                   x={"é": 1})
    assert got == '1|1|{\n "é": 1\n}|g'


@pytest.mark.parametrize("messages, message", [
    ("hi", "messages must be a list of dicts, not str"),
    ([["user", "hi"]], "messages[0] is list, not a dict"),
    ([{"content": "hi"}], "messages[0] has no 'role'"),
])
def test_malformed_messages_are_refused(template, messages, message):
    with pytest.raises(ChatTemplateError, match=message.replace("[", r"\[")):
        template.render(messages)


# ---------------------------------------------------------------- chat on the engine

@pytest.fixture(scope="module")
def engine(chat_checkpoint):
    return Qwen3.from_pretrained(chat_checkpoint, device="cpu", max_seq_len=160)


def test_chat_replies_until_im_end(chat_checkpoint, engine):
    ids = eos_prompt(chat_checkpoint)
    s = engine.chat(EOS_MESSAGES, enable_thinking=False, stream=True, max_new_tokens=12)
    pieces = list(s)
    assert s.finish_reason == "eos" and s.tokens[-1] == IM_END
    assert s.tokens == engine.generate(ids, 12)            # the same prompt tokens
    assert "".join(p.text for p in pieces) == s.text == engine.decode(s.tokens[:-1])
    assert engine.chat(EOS_MESSAGES, enable_thinking=False, max_new_tokens=12) == s.text


def test_a_session_keeps_the_conversation(engine):
    chat = engine.session(system="Be brief.", enable_thinking=False, max_new_tokens=6)
    first = chat.send("hello world from tilelab")
    assert [m["role"] for m in chat.messages] == ["system", "user", "assistant"]
    assert chat.messages[-1]["content"] == first == chat.last.text
    pieces = list(chat.send("what is a tile", stream=True))
    assert chat.messages[-1] == {"role": "assistant",
                                 "content": "".join(p.text for p in pieces)}
    assert chat.messages[-2] == {"role": "user", "content": "what is a tile"}
    chat.reset()
    assert chat.messages == [{"role": "system", "content": "Be brief."}]


def test_a_model_without_a_template_says_so(qwen3_checkpoint_factory):
    model = Qwen3.from_pretrained(qwen3_checkpoint_factory(tokenizer=True), device="cpu",
                                  max_seq_len=16)
    assert model.chat_template is None
    with pytest.raises(ChatTemplateError, match="has no chat template"):
        model.chat([{"role": "user", "content": "hi"}])
    with pytest.raises(ChatTemplateError, match="has no chat template"):
        model.session()


def test_doctests():
    import doctest

    import tilelab.models.chat
    import tilelab.models.tokenizer_config

    for m in (tilelab.models.chat, tilelab.models.tokenizer_config):
        assert doctest.testmod(m).failed == 0
