"""Paragraphs of XML documents as segments, and their translations put back in place.

One walker serves two layouts:

- Mixed content (HTML, XHTML in EPUB, OpenDocument): a paragraph's text lives in its own text and
  in inline elements (`<b>`, `<a href>`, `text:span`), with the text between them in tails.
- Office Open XML runs (Word `w:p`, DrawingML `a:p` in PowerPoint and charts, Excel shared and
  inline strings): a paragraph holds runs (`w:r`), each with its formatting (`w:rPr`) and text
  (`w:t`), some inside containers (`w:hyperlink`, `w:ins`, content controls).

Each element of a paragraph is one of: a property (`w:pPr`: stays, ends the text flow), a break
(`<br>`, a run holding only `w:br`/`w:tab`, `a:br`: the text before and after are separate
segments), inline formatting or a container (its text gets a style, the chain of those elements),
a run (OOXML: the style also holds its formatting and the run as template), an atom (images,
inline code, note references, fields, bookmarks, formulas: kept as is, placed by the driver), or
skipped (scripts, styles, code blocks: kept, never looked inside). Nested paragraphs (text boxes,
footnote bodies, table cells in a frame) are found inside atoms and translated on their own.

Writing a segment back replaces the elements its text came from: runs are rebuilt from the
template run of their style (the formatting copied, new text), inline elements are re-created as
shallow copies (same tag and attributes) around the words they cover, and atoms are moved into
place. Everything outside the segment's stretch of the paragraph is not touched.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from lxml import etree

from app.documents.segments import Run, Segment
from app.documents.sentences import is_translatable

BLOCK, INLINE, LEAF, ATOM, BREAK, PROP, SKIP = "block", "inline", "leaf", "atom", "break", "prop", "skip"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
DRAWINGML = "http://schemas.openxmlformats.org/drawingml/2006/main"


def local(el) -> str:
    tag = el.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


def namespace(el) -> str:
    return el.tag[1:].split("}", 1)[0] if el.tag.startswith("{") else ""


@dataclass(frozen=True, eq=False)
class Style:
    chain: tuple = ()  # inline elements / containers from the paragraph down to the text, outermost first
    fmt: bytes | None = None  # OOXML: the run's serialized properties
    template: object = None  # OOXML: a run of this formatting, copied for new text

    def __eq__(self, other):
        return isinstance(other, Style) and self.chain == other.chain and self.fmt == other.fmt

    def __hash__(self):
        return hash((tuple(id(e) for e in self.chain), self.fmt))


@dataclass
class Chunk:
    block: object
    after: object  # the child the stretch starts after (None: at the start of the block)
    children: list = field(default_factory=list)  # the block's children the stretch covers
    runs: list[Run] = field(default_factory=list)
    attribute: str = ""  # set: the chunk is this attribute's value (alt, title), not paragraph text


class XmlFlow:
    """The paragraphs of one XML vocabulary; subclasses say what each element is."""

    mixed = True  # text in .text/.tail counts (HTML, ODF); OOXML's whitespace between elements does not
    blocks: frozenset = frozenset()
    inlines: frozenset = frozenset()
    leaves: frozenset = frozenset()
    breaks: frozenset = frozenset()
    props: frozenset = frozenset()
    skips: frozenset = frozenset()
    atoms: frozenset = frozenset()
    plain_blocks: frozenset = frozenset()  # blocks whose own text counts even when `mixed` is off
    attributes: frozenset = frozenset()  # attributes holding human text (alt, title)
    break_children: frozenset = frozenset()  # OOXML run children that end the text flow (w:br, w:tab)
    dropped: frozenset = frozenset()  # marks the application regenerates (w:proofErr): removed first
    default = ATOM  # elements in none of the sets

    def base_kind(self, el) -> str:
        name = local(el)
        if not name:
            return ATOM  # comments, processing instructions
        if name in self.leaves and self.break_children:
            content = [local(c) for c in el if not local(c).endswith("Pr")]
            if content and all(c in self.break_children for c in content):
                return BREAK
        for kind, names in (
            (SKIP, self.skips), (PROP, self.props), (BREAK, self.breaks), (BLOCK, self.blocks),
            (LEAF, self.leaves), (INLINE, self.inlines), (ATOM, self.atoms),
        ):
            if name in names:
                return kind
        return self.default

    def kind(self, el) -> str:
        k = self.base_kind(el)
        if k == INLINE and self._holds_block(el):
            return BLOCK  # e.g. <a> around a <div>: its own text is a paragraph
        return k

    def _holds_block(self, el) -> bool:
        for child in el:
            k = self.base_kind(child)
            if k == BLOCK or (k == INLINE and self._holds_block(child)):
                return True
        return False

    def skip_element(self, el) -> bool:
        """An element whose text must not be translated (e.g. HTML translate="no")."""
        return False

    # -- reading -------------------------------------------------------------------------------------

    def prepare(self, root) -> None:
        """Drop regenerated marks; split runs at their breaks so that a break is a run of its own."""
        if self.dropped:
            for el in [e for e in root.iter() if local(e) in self.dropped]:
                el.getparent().remove(el)  # their tails are OOXML whitespace
        if not self.break_children:
            return
        for run in [e for e in root.iter() if local(e) in self.leaves]:
            content = [c for c in run if not local(c).endswith("Pr")]
            kinds = {local(c) in self.break_children for c in content}
            if len(kinds) < 2:
                continue
            groups: list[list] = []
            for c in content:
                if not groups or (local(c) in self.break_children) != (local(groups[-1][-1]) in self.break_children):
                    groups.append([])
                groups[-1].append(c)
            parent, index = run.getparent(), run.getparent().index(run)
            parent.remove(run)
            for i, group in enumerate(groups):
                piece = shallow_copy(run)
                piece.extend(group)
                parent.insert(index + i, piece)

    def chunks(self, root) -> list[Chunk]:
        """Every stretch of paragraph text under `root` with something to translate, in document order."""
        self.prepare(root)
        out: list[Chunk] = []
        self._visit(root, out)
        return [c for c in out if is_translatable("".join(r.text for r in c.runs))]

    def _visit(self, el, out: list[Chunk]) -> None:
        kind = self.kind(el)
        if kind == SKIP or self.skip_element(el):
            return
        for name in self.attributes:
            value = el.get(name)
            if value and is_translatable(value):
                out.append(Chunk(el, None, runs=[Run(value, Style())], attribute=name))
        if kind == BLOCK:
            out.extend(self._block_chunks(el))
        for child in el:
            if isinstance(child.tag, str):
                self._visit(child, out)

    def _block_chunks(self, block) -> list[Chunk]:
        chunks = [Chunk(block, None)]
        if self._own_text(block) and block.text:
            chunks[-1].runs.append(Run(block.text, Style()))
        for child in block:
            kind = self.kind(child)
            if kind in (BLOCK, BREAK, PROP):
                chunks.append(Chunk(block, child))
                if self.mixed and child.tail:
                    chunks[-1].runs.append(Run(child.tail, Style()))
                continue
            chunks[-1].children.append(child)
            self._collect(child, (), chunks[-1].runs)
        return chunks

    def _own_text(self, block) -> bool:
        return self.mixed or local(block) in self.plain_blocks

    def _collect(self, el, chain: tuple, runs: list[Run]) -> None:
        kind = self.kind(el) if isinstance(el.tag, str) else ATOM
        if kind == INLINE and not self.skip_element(el):
            inner = chain + (el,)
            if self.mixed and el.text:
                runs.append(Run(el.text, Style(inner)))
            for child in el:
                if self.kind(child) != PROP:  # copied with the element (w:sdtPr)
                    self._collect(child, inner, runs)
        elif kind == LEAF:
            self._collect_leaf(el, chain, runs)
        else:
            runs.append(Run("", Style(chain), atom=el))
        if self.mixed and el.tail:
            runs.append(Run(el.tail, Style(chain)))

    def _collect_leaf(self, leaf, chain: tuple, runs: list[Run]) -> None:
        """An OOXML run: its text pieces with its formatting; anything else in it is an atom."""
        props = [c for c in leaf if local(c).endswith("Pr")]
        style = Style(chain, b"".join(etree.tostring(p) for p in props), leaf)
        if local(leaf) == "t":  # Excel's unformatted string: the text element is the run
            runs.append(Run(leaf.text or "", style))
            return
        for child in leaf:
            if child in props:
                continue
            if local(child) == "t":
                runs.append(Run(child.text or "", style))
            else:
                runs.append(Run("", style, atom=child))

    # -- writing -------------------------------------------------------------------------------------

    def write_chunk(self, chunk: Chunk, runs: list[Run]) -> None:
        """Replace the chunk's stretch of its paragraph with `runs` (translated text, the same atoms)."""
        block = chunk.block
        if chunk.attribute:
            block.set(chunk.attribute, "".join(r.text for r in runs if r.atom is None))
            return
        for child in chunk.children:
            block.remove(child)  # atoms inside are moved out below
        lead, nodes = self._build(runs)
        if chunk.after is None:
            index = 0
            if self._own_text(block):
                block.text = lead
        else:
            index = block.index(chunk.after) + 1
            if self.mixed:
                chunk.after.tail = lead
        for i, node in enumerate(nodes):
            block.insert(index + i, node)

    def _build(self, runs: list[Run]) -> tuple[str | None, list]:
        holder = etree.Element("holder")
        stack: list[tuple[object, object]] = [(None, holder)]
        for run in runs:
            style: Style = run.style if isinstance(run.style, Style) else Style()
            depth = 0
            while depth < len(style.chain) and depth + 1 < len(stack) and stack[depth + 1][0] is style.chain[depth]:
                depth += 1
            del stack[depth + 1 :]
            for original in style.chain[depth:]:
                clone = shallow_copy(original)
                stack[-1][1].append(clone)
                stack.append((original, clone))
            parent = stack[-1][1]
            if run.atom is not None:
                target = parent
                if style.template is not None:
                    target = make_leaf(style.template, None)
                    parent.append(target)
                target.append(run.atom)
                run.atom.tail = None
            elif style.template is not None:
                parent.append(make_leaf(style.template, run.text))
            else:
                append_text(parent, run.text)
        return holder.text, list(holder)


def shallow_copy(el):
    """The element's tag and attributes, and its property children (`w:sdtPr`), without content."""
    clone = el.makeelement(el.tag, el.attrib)
    for child in el:
        if local(child).endswith("Pr"):
            clone.append(copy.deepcopy(child))
    return clone


def make_leaf(template, text: str | None):
    """A new run with the template's formatting and `text` (None: empty, for an atom)."""
    leaf = shallow_copy(template)
    if text is None:
        return leaf
    if local(template) == "t":  # Excel's unformatted string
        leaf.text = text
        t = leaf
    else:
        ns = namespace(template)
        t = leaf.makeelement(f"{{{ns}}}t" if ns else "t", {})
        t.text = text
        leaf.append(t)
    if namespace(template) != DRAWINGML and text != text.strip():
        t.set(XML_SPACE, "preserve")  # Word and Excel drop edge spaces without it; DrawingML keeps them
    return leaf


def append_text(parent, text: str) -> None:
    if not text:
        return
    if len(parent):
        last = parent[-1]
        last.tail = (last.tail or "") + text
    else:
        parent.text = (parent.text or "") + text


def chunk_segments(chunks: list[Chunk]) -> list[Segment]:
    return [Segment(c.runs) for c in chunks]
