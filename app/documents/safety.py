"""Reading untrusted files: size limits, text encodings, zip archives and XML, each refused with a clear reason.

- Files: at most `MAX_FILE_BYTES`; empty files are refused.
- Text: UTF-8 (with or without BOM), UTF-16/32 with a BOM, UTF-16 without one (zero bytes on one
  side of each pair); else the encoding an HTML page declares, or the one charset-normalizer
  recognises (Windows-125x, Shift-JIS, EUC-JP, Big5, KOI8-R, GB18030...), said as assumed.
  Control characters in the decoded text, or bytes no encoding explains, are binary content.
- Zip archives (Office, OpenDocument, EPUB): names that are absolute, hold `..`, or collide with
  another member (the same name twice, or names differing only by case or `./`, which OPC and
  EPUB readers take for one) are refused, as are encrypted members, compression other than
  stored, deflate and bzip2, and more than `MAX_MEMBERS` members. Sizes are checked on the bytes
  actually inflated, never trusted from the headers: every member is inflated once when the
  archive is opened, in `CHUNK_BYTES` steps, keeping nothing, and must come out exactly as large as
  its header declares (it is refused the moment it grows past that) and with its CRC. The declared
  sizes are bounded first: at most `MAX_MEMBER_BYTES` for a member (media, which do not compress,
  are the big members) and `MAX_UNPACKED_BYTES` for all together. Members are copied to the output
  through the same chunked reader, so copying holds no member whole.
- Parsed parts (XML held as lxml trees until the document is written): at most `MAX_PART_BYTES`
  for one part, and for all of them together `MAX_PARSED_BYTES` and `MAX_PARSED_MARKUP` (the
  count of `<` and `=` bytes, a bound on elements and attributes whatever the encoding, since
  lxml spends 100-200 bytes on each). A 300-page report as python-docx writes it holds 1.8 MB and
  140,000 markup bytes, a 5,000-row, 20-column sheet as openpyxl writes it 4.8 MB and 690,000, a
  novel's chapters a few MB and less markup. The costliest document within these bounds (formatted
  runs up to the markup budget, text up to the byte budget) grows the process by about 720 MiB
  while it is read; `PEAK_BYTES` is the bound stated for a hostile file.
- XML: lxml with entities never resolved, no DTD loading, no network, no huge trees; a document
  that declares entities is refused outright (billion laughs, external entities), checked on the
  bytes in UTF-8, UTF-16 and UTF-32 before parsing and on the DTD lxml actually parsed after.
"""

from __future__ import annotations

import bz2
import codecs
import copy
import io
import posixpath
import re
import struct
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Iterator

from lxml import etree

MiB = 1024 * 1024
MAX_FILE_BYTES = 512 * MiB
MAX_MEMBERS = 10_000
MAX_DIRECTORY_BYTES = 4 * MiB  # the central directory: real entries take ~100 bytes each
MAX_MEMBER_BYTES = 512 * MiB
MAX_UNPACKED_BYTES = 768 * MiB
MAX_PART_BYTES = 32 * MiB
MAX_PARSED_BYTES = 64 * MiB
MAX_PARSED_MARKUP = 2_000_000
PEAK_BYTES = 1024 * MiB
CHUNK_BYTES = 1 * MiB
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # encrypted Office files, and the old .doc/.xls/.ppt
LOCAL_HEADER = struct.Struct("<4s2xH18xHH")  # signature, flags, the name's and the extra field's lengths
ENTITY_MARKS = tuple("<!ENTITY".encode(e) for e in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"))
# zipfile's own reader of the end-of-central-directory record (zip64 included) and the indices of
# its fields, private and so not in typeshed: read on purpose, to bound the directory before
# zipfile builds an entry per member.
_end_record = getattr(zipfile, "_EndRecData")
_END_ENTRIES = getattr(zipfile, "_ECD_ENTRIES_TOTAL")
_END_DIRECTORY_BYTES = getattr(zipfile, "_ECD_SIZE")


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


def decode_text(data: bytes, declared: str | None = None) -> tuple[str, str]:
    """(text, the codec to write it back with): Unicode with a BOM, UTF-16 without one, UTF-8, the
    encoding a page `declared` where it decodes the bytes, else the one charset-normalizer finds
    (a legacy encoding: `assumed_encoding` says so). Binary data is refused."""
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
        utf16 = _bomless_utf16(data)
        try:
            if utf16 is None:
                raise DocumentError("zero bytes that are no UTF-16")
            return _text(data.decode(utf16)), utf16
        except (UnicodeDecodeError, DocumentError):
            raise DocumentError("binary content: this is not a text file") from None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    codec = _codec(declared) if declared else None
    if codec and not codec.startswith("utf"):
        try:
            return _text(data.decode(codec)), codec
        except (UnicodeDecodeError, DocumentError):
            pass
    import charset_normalizer  # only for the files that need it

    matches = charset_normalizer.from_bytes(data[:DETECT_BYTES])
    found = matches.best()
    if found is None:
        raise DocumentError("binary content, or text in an encoding that could not be recognised: save it as UTF-8 "
                            "and try again")
    ties = [m for m in matches if (m.percent_chaos, m.percent_coherence) == (found.percent_chaos, found.percent_coherence)]
    # Between encodings that read the bytes equally well: the one whose reading has the fewest
    # characters that text seldom holds (Japanese kana read as EUC-KR are Hangul jamo), then the
    # most common one (Western European text reads as well in windows-1250 as in windows-1252).
    fewest = min(_rare_characters(str(m)) for m in ties)
    ties = [m for m in ties if _rare_characters(str(m)) == fewest]
    encoding = "cp1252" if any("cp1252" in m.could_be_from_charset for m in ties) else ties[0].encoding
    try:
        return _text(data.decode(encoding)), _codec(encoding) or encoding
    except (UnicodeDecodeError, DocumentError):
        raise DocumentError(f"not valid UTF-8 text, nor {encoding_label(encoding)} text: save it as UTF-8 and try "
                            "again") from None


DETECT_BYTES = 256 * 1024  # what charset-normalizer looks at: plenty to tell an encoding, bounded time
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")


_RARE = re.compile("[\u2500-\u259f\u3130-\u318f\ue000-\uf8ff\uf900-\ufaff\uff61-\uffdc]")  # box drawing, jamo,
# private use, compatibility ideographs, half-width forms


def _rare_characters(text: str) -> int:
    return len(_RARE.findall(text))


def _text(text: str) -> str:
    """`text`, unless control characters say it was binary data."""
    if _CONTROL.search(text[:65536]):
        raise DocumentError("binary content: this is not a text file")
    return text


def _bomless_utf16(data: bytes) -> str | None:
    """'utf-16-le' or 'utf-16-be' for data whose zero bytes fall on one side of at least half the
    pairs, as the high bytes of Latin text written in UTF-16 without a BOM do; else None."""
    head = data[:8192]
    if len(data) % 2:
        return None
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if odd >= len(head) // 4 and even == 0:
        return "utf-16-le"
    if even >= len(head) // 4 and odd == 0:
        return "utf-16-be"
    return None


def _codec(name: str) -> str | None:
    """Python's name of a codec (`windows-1252` -> `cp1252`), None for one it does not know."""
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


# Python's codec names that are not the labels the web knows them by (WHATWG Encoding).
_LABELS = {"cp932": "Shift_JIS", "shift_jis": "Shift_JIS", "euc_jp": "EUC-JP", "euc_jis_2004": "EUC-JP",
           "iso2022_jp": "ISO-2022-JP", "big5": "Big5", "big5hkscs": "Big5-HKSCS", "cp949": "EUC-KR",
           "euc_kr": "EUC-KR", "koi8-r": "KOI8-R", "koi8-u": "KOI8-U", "gb2312": "GB2312", "gbk": "GBK",
           "gb18030": "GB18030", "mac-roman": "macintosh", "cp874": "windows-874", "tis-620": "windows-874"}


def encoding_label(codec: str) -> str:
    """The name a page declares and a user knows for a codec: `cp1252` -> `windows-1252`."""
    name = _codec(codec) or codec
    if re.fullmatch(r"cp125\d", name):
        return "windows-" + name[2:]
    return _LABELS.get(name, name.upper() if name.startswith("utf") else name.replace("_", "-"))


def assumed_encoding(codec: str) -> str | None:
    """One line saying what a file was read as, where that was a guess (not UTF-8, no BOM); else None."""
    if codec in ("utf-8", "utf-8-sig", "utf-16", "utf-32"):
        return None
    if codec.startswith("utf-16"):
        return f"read as {encoding_label(codec)} (UTF-16 without a byte order mark)"
    return f"read as {encoding_label(codec)} (the file is not UTF-8)"


class SafeZip:
    """A zip archive checked against path escapes, colliding names, encryption and zip bombs before
    anything is used; its members read and copied in bounded chunks, its XML parts parsed within
    the parsed-part budgets."""

    def __init__(self, path: Path, kind: str):
        """`kind` names the format with its article ("a Word document"), for the messages."""
        check_file(path)
        with open(path, "rb") as f:
            head = f.read(8)
            unreadable: Exception | None = None
            try:
                end = _end_record(f)
            except (zipfile.BadZipFile, OSError, ValueError, struct.error) as e:  # a zip64 record spanning disks...
                end, unreadable = None, e
        if head.startswith(OLE_MAGIC):
            raise DocumentError(f"password-protected (encrypted) or an old binary format, not {kind}")
        if not head.startswith(b"PK"):
            raise DocumentError(f"not {kind} (its content is not a zip archive)")
        if unreadable is not None:
            raise DocumentError(f"corrupt or truncated archive ({unreadable})")
        if end is None:
            raise DocumentError("corrupt or truncated archive (no end of central directory)")
        if end[_END_ENTRIES] > MAX_MEMBERS or end[_END_DIRECTORY_BYTES] > MAX_DIRECTORY_BYTES:
            # refused before zipfile builds an entry per member of a directory that could fill the file
            raise DocumentError(f"too many files in the archive (the limit is {MAX_MEMBERS})")
        try:
            # zipfile reads only the central directory here; members are inflated by _chunks below
            with zipfile.ZipFile(path) as z:
                infos = z.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            raise DocumentError(f"corrupt or truncated archive ({e})") from None
        if len(infos) > MAX_MEMBERS:
            raise DocumentError(f"too many files in the archive ({len(infos)}; the limit is {MAX_MEMBERS})")
        self.infos = infos
        self._by_key: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            self._check_member(info)
        declared = sum(i.file_size for i in infos)
        if declared > MAX_UNPACKED_BYTES:
            raise DocumentError(
                f"the archive unpacks to {declared / MiB:.0f} MiB, over the limit of {MAX_UNPACKED_BYTES // MiB} MiB"
            )
        self._file = open(path, "rb")
        try:
            for info in infos:  # headers may lie: inflate everything once, keeping nothing
                for _ in self._chunks(info):
                    pass
        except BaseException:
            self._file.close()
            raise
        self.parsed_bytes = 0
        self.parsed_markup = 0

    def _check_member(self, info: zipfile.ZipInfo) -> None:
        name = info.filename
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if not parts or name.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise DocumentError(f"unsafe path in the archive: {name!r}")
        if info.flag_bits & 0x1:
            raise DocumentError("password-protected (encrypted archive)")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2):
            raise DocumentError(f"archive member {name} uses compression method {info.compress_type}, which is not supported")
        if info.file_size > MAX_MEMBER_BYTES:
            raise DocumentError(
                f"archive member {name} unpacks to {info.file_size / MiB:.0f} MiB, over the limit of {MAX_MEMBER_BYTES // MiB} MiB"
            )
        key = member_key(name)
        other = self._by_key.get(key)
        if other is not None:
            if other.filename == name:
                raise DocumentError(f"archive member {name} is present twice")
            raise DocumentError(
                f"archive members {other.filename} and {name} differ only by case or by './', which readers confuse"
            )
        self._by_key[key] = info

    def find(self, name: str) -> str | None:
        """The member that a part name refers to, matched as OPC and EPUB readers do (case and `./` ignored)."""
        info = self._by_key.get(member_key(name))
        return info.filename if info is not None else None

    def _chunks(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """The member's inflated bytes in chunks of at most CHUNK_BYTES, refused the moment it grows past
        the size its header declares (itself within the limits), or ends short of it, or fails its CRC."""
        name = info.filename
        f = self._file
        f.seek(info.header_offset)
        header = f.read(LOCAL_HEADER.size)
        if len(header) < LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            raise DocumentError(f"corrupt archive member {name} (no local header where the directory points)")
        _, flags, name_length, extra_length = LOCAL_HEADER.unpack(header)
        local_name = f.read(name_length).decode("utf-8" if flags & 0x800 else "cp437", "replace")
        if local_name != info.orig_filename:  # readers going by the local headers would see another file
            raise DocumentError(f"corrupt archive member {name} (its local header names it {local_name!r})")
        f.seek(extra_length, io.SEEK_CUR)
        packed_left = info.compress_size
        size = crc = 0
        if info.compress_type == zipfile.ZIP_STORED:
            inflater = None
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            inflater = _Inflater(zlib.decompressobj(-15))
        else:
            inflater = _Inflater(bz2.BZ2Decompressor())
        while True:
            if inflater is None or inflater.needs_input:
                packed = f.read(min(CHUNK_BYTES, packed_left))
                packed_left -= len(packed)
                if inflater is None:
                    chunk = packed
                elif not packed:
                    raise DocumentError(f"corrupt archive member {name} (its compressed data ends early)")
                else:
                    chunk = inflater.inflate(packed, name)
            else:
                chunk = inflater.inflate(b"", name)
            if not chunk:
                if inflater is None or inflater.eof:
                    break
                continue
            size += len(chunk)
            if size > info.file_size:
                raise DocumentError(
                    f"archive member {name} inflates past the {info.file_size} bytes its header declares:"
                    " a zip bomb or a corrupt archive"
                )
            crc = zlib.crc32(chunk, crc)
            yield chunk
        if size != info.file_size:
            raise DocumentError(f"corrupt archive member {name} ({size} bytes where its header declares {info.file_size})")
        if crc != info.CRC:
            raise DocumentError(f"corrupt archive member {name} (bad CRC-32)")

    def read(self, name: str, limit: int = MAX_MEMBER_BYTES) -> bytes:
        info = self._by_key.get(member_key(name))
        if info is None:
            raise DocumentError(f"the archive has no {name}")
        if info.file_size > limit:
            raise DocumentError(
                f"{name} unpacks to {info.file_size / MiB:.0f} MiB, over the limit of {limit // MiB} MiB for one part"
            )
        return b"".join(self._chunks(info))

    def parse(self, name: str) -> etree._ElementTree:
        """An XML part, parsed within the budgets for all parsed parts together."""
        data = self.read(name, MAX_PART_BYTES)
        self.parsed_bytes += len(data)
        self.parsed_markup += data.count(b"<") + data.count(b"=")
        if self.parsed_bytes > MAX_PARSED_BYTES:
            raise DocumentError(f"its text parts hold over {MAX_PARSED_BYTES // MiB} MiB of XML, over the limit")
        if self.parsed_markup > MAX_PARSED_MARKUP:
            raise DocumentError(f"its text parts hold over {MAX_PARSED_MARKUP:,} XML tags and attributes, over the limit")
        return parse_xml(data, name)

    def write_copy(self, out_path: Path, replaced: dict[str, bytes]) -> None:
        """The same archive, member order and compression kept, with some members' bytes replaced."""
        with zipfile.ZipFile(out_path, "w") as out:
            for info in self.infos:
                entry = copy.copy(info)  # zipfile rewrites sizes and flags on the entry it writes
                if info.filename in replaced:
                    out.writestr(entry, replaced[info.filename])
                elif info.is_dir():
                    out.writestr(entry, b"")
                else:
                    with out.open(entry, "w") as member:
                        for chunk in self._chunks(info):
                            member.write(chunk)

    def close(self) -> None:
        self._file.close()


class _Inflater:
    """zlib's and bz2's decompressors behind one interface, each call giving at most CHUNK_BYTES."""

    def __init__(self, decompressor):
        self.decompressor = decompressor
        self.pending = b""  # zlib's input not yet inflated
        self.full = False  # the last call filled its chunk: more output may wait without new input

    @property
    def eof(self) -> bool:
        return self.decompressor.eof

    @property
    def needs_input(self) -> bool:
        if isinstance(self.decompressor, bz2.BZ2Decompressor):
            return self.decompressor.needs_input and not self.decompressor.eof
        return not self.pending and not self.full and not self.decompressor.eof

    def inflate(self, data: bytes, name: str) -> bytes:
        if self.decompressor.eof:
            return b""
        if isinstance(self.decompressor, bz2.BZ2Decompressor):
            try:
                return self.decompressor.decompress(data, CHUNK_BYTES)
            except (OSError, EOFError) as e:
                raise DocumentError(f"corrupt archive member {name} (bad bzip2 data: {e})") from None
        try:
            chunk = self.decompressor.decompress(self.pending + data, CHUNK_BYTES)
        except zlib.error as e:
            raise DocumentError(f"corrupt archive member {name} (bad deflate data: {e})") from None
        self.pending = self.decompressor.unconsumed_tail
        self.full = len(chunk) == CHUNK_BYTES
        return chunk


def member_key(name: str) -> str:
    """A member name as readers compare them: `\\` as `/`, `./` and `//` gone, case folded."""
    key = posixpath.normpath(name.replace("\\", "/")).lower()
    return key + "/" if name.endswith(("/", "\\")) else key


def _parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def parse_xml(data: bytes, name: str) -> etree._ElementTree:
    """The one way the app parses XML: entity declarations refused in every encoding lxml reads."""
    refusal = f"{name} declares XML entities, which are refused (entity expansion attack)"
    if any(mark in data for mark in ENTITY_MARKS):
        raise DocumentError(refusal)
    try:
        tree = etree.parse(io.BytesIO(data), _parser())
    except etree.XMLSyntaxError as e:
        raise DocumentError(f"{name} is not well-formed XML ({_syntax_reason(e)})") from None
    if _declares_entities(tree):
        raise DocumentError(refusal)
    return tree


def _syntax_reason(error: etree.XMLSyntaxError) -> str:
    """libxml2's message on one line: it breaks some over lines and names an option the user cannot
    set; lxml adds its source."""
    reason = re.sub(r",? (try|use) XML_PARSE_HUGE( option)?", "", " ".join(str(error).split()))
    return re.sub(r" \((<string>|[^()]*), line \d+\)$", "", reason)


def _declares_entities(tree: etree._ElementTree) -> bool:
    dtd = tree.docinfo.internalDTD
    return dtd is not None and next(dtd.iterentities(), None) is not None


def iterparse_xml(path: Path) -> Iterator[tuple[str, etree._Element]]:
    """A large XML file read as a stream of ("start" or "end", element), comments and processing
    instructions left out. Entity declarations are refused, checked on the bytes in every encoding
    lxml reads (chunk by chunk) and on the DTD lxml parsed; a file that is not well-formed is one
    line. The caller clears what it has read, so memory stays that of the elements it holds."""
    refusal = f"{path.name} declares XML entities, which are refused (entity expansion attack)"
    try:
        check_file(path)
    except DocumentError as e:
        raise DocumentError(f"{path}: {e}") from None
    overlap = max(len(mark) for mark in ENTITY_MARKS)
    with open(path, "rb") as f:
        tail = b""
        while chunk := f.read(CHUNK_BYTES):
            if any(mark in tail + chunk for mark in ENTITY_MARKS):
                raise DocumentError(refusal)
            tail = chunk[-overlap:]
    context = etree.iterparse(str(path), events=("start", "end"), resolve_entities=False, no_network=True,
                              load_dtd=False, huge_tree=False, remove_comments=True, remove_pis=True)
    checked = False
    try:
        for event, element in context:
            if not checked:
                if _declares_entities(element.getroottree()):
                    raise DocumentError(refusal)
                checked = True
            yield event, element
    except etree.XMLSyntaxError as e:
        last = e.error_log.last_error  # iterparse's own message may only say "no element found"
        reason = f"{last.message} (line {last.line})" if last is not None else _syntax_reason(e)
        raise DocumentError(f"{path.name} is not well-formed XML ({reason})") from None


def serialize_xml(tree: etree._ElementTree) -> bytes:
    info = tree.docinfo
    return etree.tostring(
        tree, xml_declaration=True, encoding=info.encoding or "UTF-8", standalone=info.standalone
    )
