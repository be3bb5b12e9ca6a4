"""Text inside form XObjects, moved onto the page that draws it, so that it is translated as the
page's own text is.

Many producers (InDesign, worksheet and report generators, printers' drivers) draw a page's whole
content, or its text boxes, as form XObjects; the reader and the writer edit a page's own content
stream, so such a page looked like one without text ("the PDF has no text"). Before reading, each
`Do` of a form that shows text is replaced, in the page's content, by the form's operators in its
place: `q`, the form's /Matrix as `cm`, its /BBox as a clip, its operators, `Q`. The form's
resources join the page's, renamed where the page already uses a name for something else. Forms
inside inlined forms are inlined in turn, MAX_DEPTH levels deep. The page looks as it did.

Left as they are: forms without text; forms that a Type3 glyph, a pattern or an annotation
draws; a form whose inline images would need renamed colour spaces; and whatever would take a
page past MAX_INSTRUCTIONS (a small form drawn thousands of times).
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 4  # forms inside forms inlined
MAX_INSTRUCTIONS = 500_000  # a page's operators after inlining (a page of dense text has a few thousand)

# The resource category a name operand refers to, by operator, and the operand's position.
_NAMED = {
    "Tf": ("/Font", 0), "Do": ("/XObject", 0), "gs": ("/ExtGState", 0), "cs": ("/ColorSpace", 0),
    "CS": ("/ColorSpace", 0), "sh": ("/Shading", 0), "scn": ("/Pattern", -1), "SCN": ("/Pattern", -1),
    "BDC": ("/Properties", 1), "DP": ("/Properties", 1),
}


def inline_text_forms(pdf) -> int:
    """Inline, on every page of the pikepdf `pdf`, the forms that show text; returns how many `Do`s
    were replaced."""
    return sum(_inline_page(pdf, page) for page in pdf.pages)


def _inline_page(pdf, page) -> int:
    import pikepdf

    instructions = None
    done = 0
    _own_resources(page)
    for _ in range(MAX_DEPTH):
        resources = page.obj.get("/Resources")
        xobjects = resources.get("/XObject") if isinstance(resources, pikepdf.Dictionary) else None
        if not isinstance(xobjects, pikepdf.Dictionary):
            break
        forms = {name: xobject for name, xobject in xobjects.items() if _shows_text(xobject)}
        if not forms:
            break
        if instructions is None:
            instructions = pikepdf.parse_content_stream(page)
        inlined: list = []
        replaced = 0
        for instruction in instructions:
            operands = getattr(instruction, "operands", None)
            name = str(operands[0]) if operands and str(instruction.operator) == "Do" else None
            form_body = _body(pdf, page, forms[name]) if name in forms else None
            if form_body is None or len(inlined) + len(form_body) > MAX_INSTRUCTIONS:
                inlined.append(instruction)
                continue
            inlined += form_body
            replaced += 1
        if not replaced:
            break
        instructions = inlined
        done += replaced
    if done:
        assert instructions is not None  # parsed before the first form was inlined
        page.obj.Contents = pdf.make_stream(pikepdf.unparse_content_stream(instructions))
    return done


def _own_resources(page) -> None:
    """Give the page its own copy of resources it inherits from its page tree, which inlined forms
    add to."""
    import pikepdf

    node, seen = page.obj, 0
    while "/Resources" not in node and "/Parent" in node and seen < 64:
        node, seen = node.Parent, seen + 1
    resources = node.get("/Resources")
    if node is not page.obj and isinstance(resources, pikepdf.Dictionary):
        page.obj.Resources = pikepdf.Dictionary({  # each category copied too: the names added are the page's
            key: pikepdf.Dictionary(dict(value.items())) if isinstance(value, pikepdf.Dictionary) else value
            for key, value in resources.items()})


def _shows_text(xobject, depth: int = 0) -> bool:
    """Whether the form (or one it draws, MAX_DEPTH deep) shows text."""
    import pikepdf

    if (depth >= MAX_DEPTH or not isinstance(xobject, pikepdf.Stream) or xobject.get("/Subtype") != pikepdf.Name.Form
            or "/BBox" not in xobject):
        return False
    try:
        instructions = pikepdf.parse_content_stream(xobject)
    except pikepdf.PdfError:
        return False
    if any(str(getattr(i, "operator", "")) == "BT" for i in instructions):
        return True
    form: Any = xobject  # pikepdf's stubs type get() apart from its dictionaries
    inner: Any = form.get("/Resources", {}).get("/XObject", {})  # a form drawing forms with text
    return any(_shows_text(inner[str(i.operands[0])], depth + 1) for i in instructions
               if str(getattr(i, "operator", "")) == "Do" and i.operands and str(i.operands[0]) in inner)


def _body(pdf, page, form) -> list | None:
    """The form's operators as the page draws them at a `Do`, its resources joined to the page's;
    None where it cannot be inlined."""
    import pikepdf

    try:
        instructions = pikepdf.parse_content_stream(form)
    except pikepdf.PdfError:
        return None
    renames = _join_resources(pdf, page, form)
    if renames is None or (renames.get("/ColorSpace") and any(
            isinstance(i, pikepdf.ContentStreamInlineImage) for i in instructions)):
        return None
    body = [_renamed(i, renames) for i in instructions]
    matrix = [float(v) for v in form.get("/Matrix", [1, 0, 0, 1, 0, 0])]
    x0, y0, x1, y1 = (float(v) for v in form.BBox)
    op = pikepdf.ContentStreamInstruction
    return [op([], pikepdf.Operator("q")),
            op(matrix, pikepdf.Operator("cm")),
            op([x0, y0, x1 - x0, y1 - y0], pikepdf.Operator("re")),
            op([], pikepdf.Operator("W")),
            op([], pikepdf.Operator("n")),
            *body,
            op([], pikepdf.Operator("Q"))]


def _join_resources(pdf, page, form) -> dict[str, dict[str, str]] | None:
    """Add the form's resources to the page's; returns the names changed, by category (a form
    without resources uses the page's)."""
    import pikepdf

    own = form.get("/Resources")
    if own is None:
        return {}
    if not isinstance(own, pikepdf.Dictionary):
        return None
    resources = page.obj.Resources
    renames: dict[str, dict[str, str]] = {}
    for category, entries in own.items():
        if not isinstance(entries, pikepdf.Dictionary):
            if category not in resources:  # /ProcSet: an array, meaningless today
                resources[category] = entries
            continue
        target = resources.get(category)
        if not isinstance(target, pikepdf.Dictionary):
            target = resources[category] = pikepdf.Dictionary()
        for name, value in entries.items():
            if name not in target:
                target[name] = value
            elif not _same(target[name], value):
                number = 1
                while f"{name}_f{number}" in target:
                    number += 1
                target[f"{name}_f{number}"] = value
                renames.setdefault(category, {})[name] = f"{name}_f{number}"
    return renames


def _same(a: Any, b: Any) -> bool:
    return a.is_indirect and b.is_indirect and a.objgen == b.objgen


def _renamed(instruction, renames: dict[str, dict[str, str]]):
    import pikepdf

    if not renames or isinstance(instruction, pikepdf.ContentStreamInlineImage):
        return instruction
    named = _NAMED.get(str(instruction.operator))
    if named is None or named[0] not in renames or not instruction.operands:
        return instruction
    category, position = named
    operands = list(instruction.operands)
    old = operands[position]
    if isinstance(old, pikepdf.Name) and str(old) in renames[category]:
        operands[position] = pikepdf.Name(renames[category][str(old)])
        return pikepdf.ContentStreamInstruction(operands, instruction.operator)
    return instruction
