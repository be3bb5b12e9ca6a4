"""Markdown: escapes, entities, hard breaks, inline code and links come back as written; emphasis stays emphasis."""

from markdown_it import MarkdownIt

from dragoman.app.documents import translate_document

from document_fakes import TAG, Recording, upper_keeping_tags, upper_losing_tags

MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def chinese(texts):
    """A translation into a script without spaces, placeholder tags kept: letters become Han characters."""
    def han(piece):
        return "".join(chr(0x4E00 + ord(ch.lower()) % 200) if ch.isalnum() else ch for ch in piece if not ch.isspace())
    return ["".join(p if TAG.fullmatch(p) else han(p) for p in TAG.split(t)) for t in texts]


def translated(tmp_path, source, fake=upper_keeping_tags, **kw):
    (tmp_path / "in.md").write_text(source, encoding="utf-8")
    translate_document(tmp_path / "in.md", tmp_path / "out.md", fake, overwrite=True, **kw)
    return (tmp_path / "out.md").read_text(encoding="utf-8")


def inline_children(text):
    return [c for t in MD.parse(text) if t.type == "inline" for c in t.children]


def test_escapes_and_entities_are_written_as_the_source_wrote_them(tmp_path):
    out = translated(tmp_path, "Use \\*stars\\* and \\_under\\_ for AT&amp;T, not &lt;b&gt; &copy;\n\n1\\. is no list\n")
    assert out == "T:USE \\*STARS\\* AND \\_UNDER\\_ FOR AT&amp;T, NOT &lt;B&gt; &copy;\n\nT:1. IS NO LIST\n"
    assert not any(c.type in ("em_open", "html_inline") for c in inline_children(out))


def test_a_translation_identical_to_its_source_gives_the_source_back_byte_for_byte(tmp_path):
    source = (
        "# Title with `code` and *emphasis*\n\n"
        "A paragraph with **bold**, _italic_, ~~gone~~ and [a link](http://x.org/a_b \"T\"). "
        "Escapes \\* \\` \\[x\\] and entities &amp; &lt; &nbsp;, `` `tick` `` and ` pad `,"
        " a break  \nand another\\\nend, <https://auto.example>, https://bare.example/x_y and <b>html</b>.\n\n"
        "1\\. Not a list. snake_case stays.\n\n"
        "| Name | Note |\n|------|------|\n| a    | *b*  |\n\n"
        "> quoted *text*  \n> more\n\n"
        "```\ncode block *kept*\n```\n"
    )
    assert translated(tmp_path, source, lambda texts: list(texts)) == source
def test_hard_line_breaks_keep_their_form_and_the_next_lines_indent(tmp_path):
    source = "Roses are red,  \nviolets are blue,\\\nsugar is sweet.\n\n> Quoted line  \n> and the next.\n\n- item one  \n  continued.\n"
    out = translated(tmp_path, source)
    assert out == (
        "T:ROSES ARE RED,  \nVIOLETS ARE BLUE,\\\nSUGAR IS SWEET.\n\n> T:QUOTED LINE  \n> AND THE NEXT.\n\n"
        "- T:ITEM ONE  \n  CONTINUED.\n"
    )
    assert sum(c.type == "hardbreak" for c in inline_children(out)) == 4


def test_inline_code_is_byte_identical_and_never_sent(tmp_path):
    translate = Recording(upper_losing_tags)

    source = "Run `` `x` `` then ` y ` and `a  b` or `c`.\n"
    (tmp_path / "in.md").write_text(source)
    translate_document(tmp_path / "in.md", tmp_path / "out.md", translate)
    out = (tmp_path / "out.md").read_text()
    for code in ("`` `x` ``", "` y `", "`a  b`", "`c`"):
        assert code in out
    assert not any("x" in text.lower().replace("<x", "") for text in translate.sent)


def test_adjacent_code_spans_are_never_merged(tmp_path):
    def only_tags(texts):  # the words between the code spans are gone
        return ["".join(TAG.findall(t)) or "T" for t in texts]

    out = translated(tmp_path, "Options `--config`, `-c` and `-v` exist.\n", only_tags)
    codes = [c.content for c in inline_children(out) if c.type == "code_inline"]
    assert codes == ["--config", "-c", "-v"]


def test_emphasis_in_a_translation_without_spaces_stays_emphasis(tmp_path):
    source = "The _quick_ fox and **Note:** the __bold__ dog *([preview](#p))* end.\n"
    for fake in (chinese, upper_losing_tags):
        out = translated(tmp_path, source, fake, target_script="Hans")
        children = inline_children(out)
        kinds = [c.type for c in children]
        assert kinds.count("em_open") == 2 and kinds.count("strong_open") == 2, out
        assert not any("*" in c.content or "_" in c.content for c in children if c.type == "text"), out
        assert [c.attrs["href"] for c in children if c.type == "link_open"] == ["#p"]


def test_emphasis_stays_emphasis_whatever_its_edges_hold():
    """Markers CommonMark would not read as emphasis (an opener before a space, or after a word and
    before punctuation) get the text's edge moved outside them, however the edges alternate."""
    from dragoman.app.documents.markdown import render
    from dragoman.app.documents.segments import Run

    em, strong = (("em", "*"),), (("strong", "**"),)
    for middle in (") (1) (2) (3", " ,) words here ( ,", "word (", ". , ", " (x) "):
        for style in (em, strong):
            text = render([Run("Before 1"), Run(middle, style), Run(") after.")])
            kinds = [c.type for c in inline_children(text)]
            if middle.strip(" ,.()"):
                assert kinds.count(style[0][0] + "_open") == 1, text
            assert not any("*" in c.content for c in inline_children(text) if c.type == "text"), text


def test_links_reference_definitions_and_urls_are_kept(tmp_path):
    translate = Recording(upper_keeping_tags)

    source = (
        'See [the site](http://x.org/a_b "Title") and [docs][ref], or <https://auto.example> and https://bare.example/x_y.\n'
        "\n[ref]: http://r.org/ref  'Ref'\n"
    )
    (tmp_path / "in.md").write_text(source)
    translate_document(tmp_path / "in.md", tmp_path / "out.md", translate)
    out = (tmp_path / "out.md").read_text()
    assert out.endswith("\n[ref]: http://r.org/ref  'Ref'\n")
    assert "<https://auto.example>" in out and "https://bare.example/x_y." in out
    assert not any("example" in text for text in translate.sent)
    links = [c.attrs["href"] for c in inline_children(out) if c.type == "link_open"]
    assert links == ["http://x.org/a_b", "http://r.org/ref", "https://auto.example"]


def test_lines_of_a_chinese_paragraph_join_without_a_space(tmp_path):
    translate = Recording()

    (tmp_path / "in.md").write_text("我们明天\n去北京。\nOK then\nbye.\n", encoding="utf-8")
    translate_document(tmp_path / "in.md", tmp_path / "out.md", translate, source_script="Hans")
    assert "".join(translate.sent) == "我们明天去北京。OK then bye."
