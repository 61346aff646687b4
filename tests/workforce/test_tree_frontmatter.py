"""Strict frontmatter (spec "Mailboxes on disk": the frontmatter, exactly as written)."""

import datetime

import pytest
import yaml

from workforce.tree.frontmatter import FrontmatterError, StrictSafeLoader, split_frontmatter, strict_yaml_load

SRC = "teams/eng/mailboxes/standup/MAILBOX.md"


def load(text):
    return strict_yaml_load(text, SRC)


@pytest.mark.parametrize(
    "scalar",
    [
        "no",
        "No",
        "NO",
        "yes",
        "Yes",
        "on",
        "On",
        "ON",
        "off",
        "y",
        "n",
        "0755",
        "00",
        "-01",
        "1:30",
        "190:20:30",
        "2024-01-02",
        "2024-01-02T10:00:00Z",
        "0x1F",
        "0o17",
        "0b101",
        "1_000",
        "1e3",
        ".inf",
        "-.inf",
        ".nan",
        "=",
        "<<",
        "tRUE",
        "nULL",
        "1.2.3",
        "+",
        ".",
    ],
)
def test_yaml11_lookalikes_stay_strings(scalar):
    assert load(f"k: {scalar}\n") == {"k": scalar}


@pytest.mark.parametrize(
    "scalar, value",
    [
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("false", False),
        ("False", False),
        ("FALSE", False),
        ("~", None),
        ("null", None),
        ("Null", None),
        ("NULL", None),
        ("", None),
        ("0", 0),
        ("-12", -12),
        ("+3", 3),
        ("42", 42),
        ("-0", 0),
        ("1.5", 1.5),
        ("-0.25", -0.25),
        ("1.0e3", 1000.0),
        ("+2.5E-1", 0.25),
        ("3.", 3.0),
        (".5", 0.5),
    ],
)
def test_resolved_scalars(scalar, value):
    result = load(f"k: {scalar}\n")["k"]
    assert result == value
    assert type(result) is type(value)


def test_quoted_scalars_are_strings():
    assert load('a: "true"\nb: \'12\'\nc: "~"\n') == {"a": "true", "b": "12", "c": "~"}


def test_nested_values_use_the_same_rules():
    assert load("m: [no, 0755, true, 1.5]\nn: {on: off}\n") == {"m": ["no", "0755", True, 1.5], "n": {"on": "off"}}


def test_safeloader_table_is_untouched():
    assert "tag:yaml.org,2002:timestamp" in {
        tag for resolvers in yaml.SafeLoader.yaml_implicit_resolvers.values() for tag, _ in resolvers
    }
    assert yaml.safe_load("k: no") == {"k": False}
    assert yaml.safe_load("d: 2024-01-02") == {"d": datetime.date(2024, 1, 2)}
    assert StrictSafeLoader.yaml_implicit_resolvers is not yaml.SafeLoader.yaml_implicit_resolvers
    own_tags = {tag for resolvers in StrictSafeLoader.yaml_implicit_resolvers.values() for tag, _ in resolvers}
    assert own_tags == {"tag:yaml.org,2002:" + t for t in ("null", "bool", "int", "float")}


def test_duplicate_key_names_key_file_and_line():
    with pytest.raises(FrontmatterError) as info:
        load("description: a\nmembers: []\ndescription: b\n")
    message = str(info.value)
    assert '"description"' in message and "duplicate key" in message
    assert SRC in message and "line 3" in message
    assert info.value.line == 3 and info.value.source == SRC


def test_duplicate_key_nested():
    with pytest.raises(FrontmatterError, match=r'line 3: duplicate key "a"'):
        load("outer:\n  a: 1\n  a: 2\n")


def test_invalid_yaml_names_file_and_line():
    with pytest.raises(FrontmatterError) as info:
        load("a: 1\n b: 2\n  c: [\n")
    assert str(info.value).startswith(f"{SRC}, line ")
    assert "not valid YAML" in str(info.value)


def test_first_line_offsets_reported_lines():
    with pytest.raises(FrontmatterError) as info:
        strict_yaml_load("a: 1\na: 2\n", SRC, first_line=2)
    assert info.value.line == 3


def test_frontmatter_error_is_a_value_error():
    assert issubclass(FrontmatterError, ValueError)


# ---------------------------------------------------------------- split_frontmatter


def test_split_basic():
    text = "---\ndescription: Daily status.\nmembers: [eng.lead]\n---\n\nPost what you finished.\n"
    declared, body = split_frontmatter(text, SRC)
    assert declared == {"description": "Daily status.", "members": ["eng.lead"]}
    assert body == "\nPost what you finished.\n"


def test_split_bom_and_crlf():
    text = "\ufeff---\r\ndescription: x\r\nmode: 0755\r\n---\r\nLine one.\r\nLine two.\r\n"
    declared, body = split_frontmatter(text, SRC)
    assert declared == {"description": "x", "mode": "0755"}
    assert body == "Line one.\r\nLine two.\r\n"


def test_body_verbatim_including_later_fences():
    text = "---\na: 1\n---\nbody\n---\nmore: yes\n  \n"
    assert split_frontmatter(text, SRC) == ({"a": 1}, "body\n---\nmore: yes\n  \n")


def test_closing_fence_at_end_of_file():
    assert split_frontmatter("---\na: 1\n---", SRC) == ({"a": 1}, "")


@pytest.mark.parametrize("text", ["---\n---\n", "---\n---", "---\n# only a comment\n---\nbody"])
def test_empty_block_is_empty_mapping(text):
    declared, _ = split_frontmatter(text, SRC)
    assert declared == {}


@pytest.mark.parametrize(
    "text", ["", "description: x\n", "\n---\na: 1\n---\n", "--- \na: 1\n---\n", "----\na: 1\n----\n", "# title\n"]
)
def test_no_opening_fence(text):
    with pytest.raises(FrontmatterError) as info:
        split_frontmatter(text, SRC)
    assert "carries no frontmatter" in str(info.value)
    assert SRC in str(info.value) and info.value.line == 1


@pytest.mark.parametrize("text", ["---", "---\n", "---\ndescription: x\n", "---\na: 1\n--- \nbody\n", "---\na: 1\n...\n"])
def test_unclosed_block(text):
    with pytest.raises(FrontmatterError) as info:
        split_frontmatter(text, SRC)
    assert "frontmatter block is not closed" in str(info.value)
    assert SRC in str(info.value)


@pytest.mark.parametrize(
    "block, what",
    [
        ("- a\n- b\n", "a list"),
        ("just words\n", 'a string ("just words")'),
        ("42\n", "a number (42)"),
        ("true\n", "a boolean (true)"),
    ],
)
def test_non_mapping_block_says_what_it_is(block, what):
    with pytest.raises(FrontmatterError) as info:
        split_frontmatter(f"---\n{block}---\nbody\n", SRC)
    message = str(info.value)
    assert f"is {what}, not a mapping" in message
    assert message.startswith(f"{SRC}, line 2:")


def test_duplicate_key_line_is_the_file_line():
    with pytest.raises(FrontmatterError) as info:
        split_frontmatter("---\ndescription: a\ndescription: b\n---\n", SRC)
    assert info.value.line == 3
    assert str(info.value) == f'{SRC}, line 3: duplicate key "description" in the frontmatter. A key is declared once.'


def test_a_plain_value_with_a_colon_suggests_quoting_it():
    with pytest.raises(FrontmatterError) as info:
        split_frontmatter("---\nmembers: [eng.lead]\ndescription: Fixes: printers\n---\nbody\n", SRC)
    assert str(info.value) == (
        f"{SRC}, line 3: the frontmatter is not valid YAML: mapping values are not allowed here; "
        "quote a value that contains ': ' (description: \"Fixes: printers\")."
    )
    assert info.value.line == 3


def test_the_colon_hint_escapes_quotes_and_other_yaml_errors_get_none():
    with pytest.raises(FrontmatterError) as info:
        load('title: Say "no": now\n')
    assert str(info.value).endswith('; quote a value that contains \': \' (title: "Say \\"no\\": now").')
    with pytest.raises(FrontmatterError) as info:
        load("a: [1, 2\n")
    assert "quote a value" not in str(info.value)
