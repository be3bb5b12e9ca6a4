"""Reading untrusted files: size limits, text encodings, zip archives and XML, each refused with a clear reason.

- Files: at most `MAX_FILE_BYTES`; empty files are refused.
- Text: UTF-8 (with or without BOM) or UTF-16/32 with a BOM; anything else is refused with the
  offset of the first bad byte, never guessed.
- Zip archives (Office, OpenDocument, EPUB): members with absolute names or `..` are refused, as
  are encrypted members, more than `MAX_MEMBERS` members, more than `MAX_UNPACKED_BYTES` unpacked
  in total, or a member unpacking to over `MAX_RATIO` times its packed size (zip bombs). Reads are
  bounded by the declared size, and zipfile checks each member's CRC and length.
- XML: lxml with entities never resolved, no DTD loading, no network, no huge trees; a document
  that declares entities (`<!ENTITY`) is refused outright (billion laughs, external entities).
"""

from __future__ import annotations

import codecs
import io
import zipfile
from pathlib import Path, PurePosixPath

from lxml import etree

MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024
MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 20_000
MAX_RATIO = 200  # a deflated member that grows more than this is a zip bomb (real XML compresses ~10-30x)
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # encrypted Office files, and the old .doc/.xls/.ppt


class DocumentError(Exception):
    """A file that cannot be translated, and why (one line, for the user)."""


def check_file(path: Path) -> int:
    try:
        size = path.stat().st_size
    except OSError as e:
        raise DocumentError(f"cannot read it ({e.strerror or e})") from None
    if not path.is_file():
        raise DocumentError("not a file")
    if size == 0:
        raise DocumentError("the file is empty")
    if size > MAX_FILE_BYTES:
        raise DocumentError(f"too large ({size / 2**20:.0f} MiB; the limit is {MAX_FILE_BYTES // 2**20} MiB)")
    return size


def read_bytes(path: Path) -> bytes:
    check_file(path)
    try:
        return path.read_bytes()
    except OSError as e:
        raise DocumentError(f"cannot read it ({e.strerror or e})") from None


def decode_text(data: bytes) -> tuple[str, str]:
    """(text, encoding name to write back with). Refuses binary data and other encodings."""
    for bom, encoding in (
        (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            try:
                return data.decode(encoding), encoding
            except UnicodeDecodeError as e:
                raise DocumentError(f"not valid {encoding.upper()} text (bad bytes at offset {e.start})") from None
    if b"\x00" in data[:8192]:
        raise DocumentError("binary content: this is not a text file")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as e:
        raise DocumentError(
            f"not valid UTF-8 text (byte {data[e.start]:#04x} at offset {e.start}); save it as UTF-8 and try again"
        ) from None


class SafeZip:
    """A zip archive checked against path escapes, encryption and zip bombs before anything is read."""

    def __init__(self, path: Path, kind: str):
        data_size = check_file(path)
        with open(path, "rb") as f:
            head = f.read(8)
        if head.startswith(OLE_MAGIC):
            raise DocumentError(f"password-protected (encrypted) or an old binary format, not a {kind}")
        if not head.startswith(b"PK"):
            raise DocumentError(f"not a {kind} (its content is not a zip archive)")
        try:
            self.zip = zipfile.ZipFile(path)
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, OSError, ValueError) as e:
            raise DocumentError(f"corrupt or truncated archive ({e})") from None
        if len(infos) > MAX_MEMBERS:
            raise DocumentError(f"too many files in the archive ({len(infos)})")
        total = 0
        for info in infos:
            name = info.filename
            parts = PurePosixPath(name.replace("\\", "/")).parts
            if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
                raise DocumentError(f"unsafe path in the archive: {name!r}")
            if info.flag_bits & 0x1:
                raise DocumentError("password-protected (encrypted archive)")
            if info.file_size > MAX_MEMBER_BYTES:
                raise DocumentError(f"archive member {name} is too large ({info.file_size / 2**20:.0f} MiB)")
            if info.file_size > 1024 * 1024 and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                raise DocumentError(f"archive member {name} unpacks {info.file_size // max(info.compress_size, 1)}x: a zip bomb")
            total += info.file_size
        if total > MAX_UNPACKED_BYTES:
            raise DocumentError(f"the archive unpacks to {total / 2**20:.0f} MiB, over the limit")
        self.infos = infos
        self.names = [i.filename for i in infos]
        self.packed_size = data_size

    def read(self, name: str) -> bytes:
        try:
            return self.zip.read(name)
        except KeyError:
            raise DocumentError(f"the archive has no {name}") from None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError) as e:
            raise DocumentError(f"corrupt archive member {name} ({e})") from None

    def write_copy(self, out_path: Path, replaced: dict[str, bytes]) -> None:
        """The same archive, member order and compression kept, with some members' bytes replaced."""
        with zipfile.ZipFile(out_path, "w") as out:
            for info in self.infos:
                data = replaced[info.filename] if info.filename in replaced else self.read(info.filename)
                out.writestr(info, data, compress_type=info.compress_type)

    def close(self) -> None:
        self.zip.close()


def _parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def parse_xml(data: bytes, name: str) -> etree._ElementTree:
    if b"<!ENTITY" in data:
        raise DocumentError(f"{name} declares XML entities, which are refused (entity expansion attack)")
    try:
        return etree.parse(io.BytesIO(data), _parser())
    except etree.XMLSyntaxError as e:
        raise DocumentError(f"{name} is not well-formed XML ({e})") from None


def serialize_xml(tree: etree._ElementTree) -> bytes:
    info = tree.docinfo
    return etree.tostring(
        tree, xml_declaration=True, encoding=info.encoding or "UTF-8", standalone=info.standalone
    )
