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


def make_epub(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The Book Title</dc:title></metadata><manifest><item id="c1" href="ch1.xhtml" media-type="application/xhtml+xml"/><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/><item id="css" href="s.css" media-type="text/css"/></manifest><spine><itemref idref="c1"/></spine></package>')
        z.writestr("OEBPS/ch1.xhtml", '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter</title></head><body><h1>Chapter one</h1><p>It was a <em>dark</em> night. The end.</p></body></html>')
        z.writestr("OEBPS/toc.ncx", '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap><navPoint id="n1"><navLabel><text>Chapter one</text></navLabel><content src="ch1.xhtml"/></navPoint></navMap></ncx>')
        z.writestr("OEBPS/s.css", "p { margin: 0 }")
