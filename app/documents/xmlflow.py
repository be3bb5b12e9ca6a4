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

An inline element with no text in it (an anchor `<a name>`, an empty hyperlink, a link around an
image) is an atom: it is kept whole wherever its neighbours' words go.

Writing a segment back replaces the elements its text came from: runs are rebuilt from the
template run of their style (the formatting copied, new text), inline elements are re-created as
shallow copies (same tag and attributes) around the words they cover, and atoms are moved into
place. Everything outside the segment's stretch of the paragraph is not touched.

Every step is linear in the document: what an element is is decided once per element, bottom-up
(`prepare`), and a run's chain of inline elements is a linked `Chain` shared by all the runs
inside one element, so neither reading nor rebuilding costs nesting depth × elements. The XML and
HTML parsers bound the nesting depth (256 levels).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Iterator, cast

from lxml import etree

from dragoman.app.documents.segments import Run
from dragoman.app.documents.sentences import is_translatable

BLOCK, INLINE, LEAF, ATOM, BREAK, PROP, SKIP = "block", "inline", "leaf", "atom", "break", "prop", "skip"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
DRAWINGML = "http://schemas.openxmlformats.org/drawingml/2006/main"


# A document has few distinct tags and up to hundreds of thousands of elements; bounded, whatever
# documents a long-running process reads.
_LOCAL_NAMES: dict[str, str] = {}
MAX_LOCAL_NAMES = 4096


def local(el: etree._Element) -> str:
    tag = el.tag
    if not isinstance(tag, str):
        return ""
    name = _LOCAL_NAMES.get(tag)
    if name is None:
        name = tag.rsplit("}", 1)[-1]
        if len(_LOCAL_NAMES) < MAX_LOCAL_NAMES:
            _LOCAL_NAMES[tag] = name
    return name


def namespace(el: etree._Element) -> str:
    return el.tag[1:].split("}", 1)[0] if el.tag.startswith("{") else ""


class Chain:
    """An inline element (or container) and the chain of those around it: one per element read, so
    two runs are inside the same elements exactly when their chains are the same object."""

    __slots__ = ("element", "outer", "depth")

    def __init__(self, element: etree._Element, outer: Chain | None):
        self.element = element
        self.outer = outer
        self.depth: int = outer.depth + 1 if outer else 1


@dataclass(frozen=True, eq=False)
class Style:
    chain: Chain | None = None  # inline elements / containers from the paragraph down to the text
    fmt: bytes | None = None  # OOXML: the run's serialized properties
    template: etree._Element | None = None  # OOXML: a run of this formatting, copied for new text

    def __eq__(self, other):
        return isinstance(other, Style) and self.chain is other.chain and self.fmt == other.fmt

    def __hash__(self):
        return hash((id(self.chain), self.fmt))


@dataclass
class Chunk:
    block: etree._Element
    after: etree._Element | None  # the child the stretch starts after (None: at the start of the block)
    children: list[etree._Element] = field(default_factory=list)  # the block's children the stretch covers
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

    def __init__(self):
        self._block_holders: set = set()  # inline elements holding a block (filled by `prepare`)
        self._textless: set = set()  # inline elements holding no text
        self._kinds: dict[str, str] = {}  # by local name, as the sets say

    def base_kind(self, el: etree._Element) -> str:
        name = local(el)
        if not name:
            return ATOM  # comments, processing instructions
        if name in self.leaves and self.break_children:
            content = [local(c) for c in el if not local(c).endswith("Pr")]
            if content and all(c in self.break_children for c in content):
                return BREAK
        kind = self._kinds.get(name)
        if kind is None:
            kind = self._kinds[name] = self._kind_by_name(name)
        return kind

    def _kind_by_name(self, name: str) -> str:
        for kind, names in (
            (SKIP, self.skips), (PROP, self.props), (BREAK, self.breaks), (BLOCK, self.blocks),
            (LEAF, self.leaves), (INLINE, self.inlines), (ATOM, self.atoms),
        ):
            if name in names:
                return kind
        return self.default

    def kind(self, el: etree._Element) -> str:
        k = self.base_kind(el)
        if k == INLINE and el in self._block_holders:
            return BLOCK  # e.g. <a> around a <div>: its own text is a paragraph
        if k == INLINE and el in self._textless:
            return ATOM  # e.g. <a name="x"></a>: nothing to translate, kept whole
        return k

    def _classify(self, root: etree._Element) -> None:
        """Which inline elements hold a block, and which hold no text: bottom-up, once per element."""
        self._block_holders, self._textless = set(), set()
        holds_block: dict = {}
        has_text: dict = {}
        for el in reversed(list(root.iter())):
            if not isinstance(el.tag, str):
                continue
            block, text = False, bool((el.text or "").strip())
            for child in el:
                if not isinstance(child.tag, str):
                    text = text or (self.mixed and bool((child.tail or "").strip()))
                    continue
                k = self.base_kind(child)
                block = block or k == BLOCK or (k == INLINE and holds_block[child])
                text = text or has_text[child] or (self.mixed and bool((child.tail or "").strip()))
            holds_block[el], has_text[el] = block, text
            if self.base_kind(el) == INLINE:
                if block:
                    self._block_holders.add(el)
                elif not text:
                    self._textless.add(el)

    def skip_element(self, el: etree._Element) -> bool:
        """An element whose text must not be translated (e.g. HTML translate="no")."""
        return False

    # -- reading -------------------------------------------------------------------------------------

    def prepare(self, root: etree._Element) -> None:
        """Drop regenerated marks; split runs at their breaks so that a break is a run of its own;
        classify the inline elements."""
        if self.dropped:
            for el in [e for e in root.iter() if local(e) in self.dropped]:
                el.getparent().remove(el)  # their tails are OOXML whitespace
        self._split_runs_at_breaks(root)
        self._classify(root)

    def _split_runs_at_breaks(self, root: etree._Element) -> None:
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
            for group in groups:
                piece = shallow_copy(run)
                piece.extend(group)
                run.addprevious(piece)  # not parent.index(): a paragraph of many breaks stays linear
            run.getparent().remove(run)

    def chunks(self, root: etree._Element) -> list[Chunk]:
        """Every stretch of paragraph text under `root` with something to translate, in document order."""
        return list(self.chunk_stream(root))

    def chunk_stream(self, root: etree._Element) -> Iterator[Chunk]:
        """`chunks`, each given as it is found (a long document's first paragraphs are translated
        while the rest is read); `root` is prepared first, as a whole."""
        self.prepare(root)
        stack = [root]  # elements still to visit, the next last: document order without recursion
        while stack:
            el = stack.pop()
            kind = self.kind(el)
            if kind == SKIP or self.skip_element(el):
                continue
            found = [Chunk(el, None, runs=[Run(value, Style())], attribute=name)
                     for name in self.attributes if (value := el.get(name)) and is_translatable(value)]
            if kind == BLOCK:
                found += self._block_chunks(el)
            yield from (c for c in found if is_translatable("".join(r.text for r in c.runs)))
            stack.extend(reversed([child for child in el if isinstance(child.tag, str)]))

    def _block_chunks(self, block: etree._Element) -> list[Chunk]:
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
            self._collect(child, None, chunks[-1].runs)
        return chunks

    def _own_text(self, block: etree._Element) -> bool:
        return self.mixed or local(block) in self.plain_blocks

    def _collect(self, el: etree._Element, chain: Chain | None, runs: list[Run]) -> None:
        kind = self.kind(el) if isinstance(el.tag, str) else ATOM
        if kind == INLINE and not self.skip_element(el):
            inner = Chain(el, chain)
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

    def _collect_leaf(self, leaf: etree._Element, chain: Chain | None, runs: list[Run]) -> None:
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
            if self._own_text(block):
                block.text = lead
            if nodes:
                block.insert(0, nodes[0])
        else:
            if self.mixed:
                chunk.after.tail = lead
            if nodes:
                chunk.after.addnext(nodes[0])  # not block.index(): a paragraph of many breaks stays linear
        for previous, node in zip(nodes, nodes[1:]):
            previous.addnext(node)

    def _build(self, runs: list[Run]) -> tuple[str | None, list[etree._Element]]:
        holder = etree.Element("holder")
        stack: list[tuple[Chain | None, etree._Element]] = [(None, holder)]  # stack[d]: the open element at depth d
        for run in runs:
            style: Style = run.style if isinstance(run.style, Style) else Style()
            to_open, node = [], style.chain
            while node and not (node.depth < len(stack) and stack[node.depth][0] is node):
                to_open.append(node)  # walks only over what must be opened: linear in the output
                node = node.outer
            del stack[(node.depth if node else 0) + 1 :]
            for opening in reversed(to_open):
                clone = shallow_copy(opening.element)
                stack[-1][1].append(clone)
                stack.append((opening, clone))
            parent = stack[-1][1]
            if run.atom is not None:
                atom = cast(etree._Element, run.atom)  # Run is every format's; this walker's atoms are elements
                target = parent
                if style.template is not None:
                    target = make_leaf(style.template, None)
                    parent.append(target)
                target.append(atom)
                atom.tail = None
            elif style.template is not None:
                parent.append(make_leaf(style.template, run.text))
            else:
                append_text(parent, run.text)
        return holder.text, list(holder)


def shallow_copy(el: etree._Element) -> etree._Element:
    """The element's tag and attributes, and its property children (`w:sdtPr`), without content."""
    clone = el.makeelement(el.tag, el.attrib)
    for child in el:
        if local(child).endswith("Pr"):
            clone.append(copy.deepcopy(child))
    return clone


def make_leaf(template: etree._Element, text: str | None) -> etree._Element:
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


def append_text(parent: etree._Element, text: str) -> None:
    if not text:
        return
    try:
        last = parent[-1]  # not len(parent): lxml counts children one by one
    except IndexError:
        parent.text = (parent.text or "") + text
    else:
        last.tail = (last.tail or "") + text
