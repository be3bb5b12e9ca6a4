"""Deterministic fake translators and a hand-made EPUB for the document tests."""

import re
import zipfile

TAG = re.compile(r"(<\s*/?\s*x\d+\s*/?>)", re.IGNORECASE)


def upper_keeping_tags(texts):
    """"T:" + the text upper-cased, placeholder tags kept: every translated text node visibly changes."""
    return ["T:" + "".join(p if TAG.fullmatch(p) else p.upper() for p in TAG.split(t)) for t in texts]


def upper_losing_tags(texts):
    """Like a random model: the tags are lost, so the proportional fallback must place formatting."""
    return ["T:" + TAG.sub("", t).upper() for t in texts]


def no_spaces(texts):
    """Like a model translating into Chinese and losing the tags: one CJK character per source word
    (the n-th word gives the n-th character of 一丁丂...), no spaces."""
    return ["".join(chr(0x4E00 + i) for i, _ in enumerate(TAG.sub("", t).split())) for t in texts]


def one_word(texts):
    """A translation far shorter than its source, tags lost: one word."""
    return ["SHORT" for _ in texts]


def make_epub(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The Book Title</dc:title></metadata><manifest><item id="c1" href="ch1.xhtml" media-type="application/xhtml+xml"/><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/><item id="css" href="s.css" media-type="text/css"/></manifest><spine><itemref idref="c1"/></spine></package>')
        z.writestr("OEBPS/ch1.xhtml", '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter</title></head><body><h1>Chapter one</h1><p>It was a <em>dark</em> night. The end.</p></body></html>')
        z.writestr("OEBPS/toc.ncx", '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap><navPoint id="n1"><navLabel><text>Chapter one</text></navLabel><content src="ch1.xhtml"/></navPoint></navMap></ncx>')
        z.writestr("OEBPS/s.css", "p { margin: 0 }")


def pdf_bytes(pages):
    """A minimal text PDF, written by hand: each page a list of lines in Helvetica 12 pt, 14 pt apart;
    None leaves a wider gap (a paragraph break). Parentheses and backslashes are escaped."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", None, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for lines in pages:
        ops = ["BT /F1 12 Tf 14 TL 72 720 Td"]
        for line in lines:
            if line is None:
                ops.append("0 -14 Td")
            else:
                escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
                ops.append(f"({escaped}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>"
            % len(objects)
        )
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


class Recording:
    """A fake translator (each text as it is, unless given another) that keeps what it was sent."""

    def __init__(self, fake=list):
        self.fake, self.sent = fake, []

    def __call__(self, texts):
        self.sent.extend(texts)
        return self.fake(texts)
