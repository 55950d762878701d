from gateway.surfaces.text import split_text


def test_short_text_is_one_chunk():
    assert split_text("hello", 100) == ["hello"]


def test_splits_at_paragraphs_and_respects_limit():
    text = ("para one. " * 30).strip() + "\n\n" + ("para two. " * 30).strip()
    chunks = split_text(text, 400)
    assert all(len(c) <= 400 for c in chunks)
    assert "".join(chunks).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")
    assert chunks[0].endswith("para one.")


def test_unbroken_run_is_cut_hard_and_code_fences_stay_balanced():
    assert [len(c) for c in split_text("x" * 100, 40)] == [36, 36, 28]
    chunks = split_text("```\n" + "line of code\n" * 50 + "```", 120)
    assert all(c.count("```") % 2 == 0 for c in chunks)
