/**
 * What an uploaded file is, decided by its bytes alone (never its name or the type its sender
 * declared): the few kinds a message may carry. Written by hand: the signatures are few, and the
 * well-known library for them needs a newer Node than ours.
 */
export interface FileType {
  contentType: string;
  /** Which message types may carry it. */
  kind: 'image' | 'document';
  /** The extensions a file of this type goes by, the usual one first (without the dot). */
  extensions: string[];
}

const T = {
  jpeg: { contentType: 'image/jpeg', kind: 'image', extensions: ['jpg', 'jpeg'] },
  png: { contentType: 'image/png', kind: 'image', extensions: ['png'] },
  webp: { contentType: 'image/webp', kind: 'image', extensions: ['webp'] },
  pdf: { contentType: 'application/pdf', kind: 'document', extensions: ['pdf'] },
  doc: { contentType: 'application/msword', kind: 'document', extensions: ['doc'] },
  xls: { contentType: 'application/vnd.ms-excel', kind: 'document', extensions: ['xls'] },
  ppt: { contentType: 'application/vnd.ms-powerpoint', kind: 'document', extensions: ['ppt'] },
  docx: {
    contentType: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    kind: 'document',
    extensions: ['docx'],
  },
  xlsx: {
    contentType: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    kind: 'document',
    extensions: ['xlsx'],
  },
  pptx: {
    contentType: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
    kind: 'document',
    extensions: ['pptx'],
  },
  odt: {
    contentType: 'application/vnd.oasis.opendocument.text',
    kind: 'document',
    extensions: ['odt'],
  },
  ods: {
    contentType: 'application/vnd.oasis.opendocument.spreadsheet',
    kind: 'document',
    extensions: ['ods'],
  },
  odp: {
    contentType: 'application/vnd.oasis.opendocument.presentation',
    kind: 'document',
    extensions: ['odp'],
  },
} as const satisfies Record<string, FileType>;

const startsWith = (bytes: Buffer, sig: number[], at = 0) =>
  bytes.length >= at + sig.length && sig.every((b, i) => bytes[at + i] === b);
const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));

const OLE2 = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];
const ZIP = [0x50, 0x4b, 0x03, 0x04];

/** The file's type, or null when it is none of those accepted. */
export function detectFileType(bytes: Buffer): FileType | null {
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return T.jpeg;
  if (startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return T.png;
  if (startsWith(bytes, ascii('RIFF')) && startsWith(bytes, ascii('WEBP'), 8)) return T.webp;
  if (startsWith(bytes, ascii('%PDF-'))) return T.pdf;
  if (startsWith(bytes, OLE2)) return oleDocument(bytes);
  if (startsWith(bytes, ZIP)) return zipDocument(bytes);
  return null;
}

/**
 * A legacy Office file is an OLE2 compound file (as are installers and much else) holding a
 * stream named for its application. Stream names sit in the directory sectors in UTF-16LE;
 * finding one is enough to tell Word, Excel and PowerPoint files from other compound files
 * without walking the sector chains.
 */
function oleDocument(bytes: Buffer): FileType | null {
  const has = (name: string) => bytes.includes(Buffer.from(name, 'utf16le'));
  if (has('WordDocument')) return T.doc;
  if (has('Workbook') || has('Book\0')) return T.xls;
  if (has('PowerPoint Document')) return T.ppt;
  return null;
}

/**
 * A zip is an Office Open XML document when it lists `[Content_Types].xml` and the part folder
 * of Word, Excel or PowerPoint, an OpenDocument when its first entry is a stored `mimetype`
 * naming one; any other zip is refused. Names are read from the central directory.
 */
function zipDocument(bytes: Buffer): FileType | null {
  const odf = openDocumentType(bytes);
  if (odf) return odf;
  const names = zipEntryNames(bytes);
  if (!names || !names.has('[Content_Types].xml')) return null;
  const under = (folder: string) => [...names].some((n) => n.startsWith(folder));
  if (under('word/')) return T.docx;
  if (under('xl/')) return T.xlsx;
  if (under('ppt/')) return T.pptx;
  return null;
}

function openDocumentType(bytes: Buffer): FileType | null {
  if (bytes.length < 30) return null;
  const method = bytes.readUInt16LE(8);
  const size = bytes.readUInt32LE(18);
  const nameLength = bytes.readUInt16LE(26);
  const extraLength = bytes.readUInt16LE(28);
  const name = bytes.toString('latin1', 30, 30 + nameLength);
  const start = 30 + nameLength + extraLength;
  if (method !== 0 || name !== 'mimetype' || size > 100 || start + size > bytes.length) return null;
  switch (bytes.toString('latin1', start, start + size)) {
    case T.odt.contentType:
      return T.odt;
    case T.ods.contentType:
      return T.ods;
    case T.odp.contentType:
      return T.odp;
    default:
      return null;
  }
}

const EOCD = 0x06054b50;
const CENTRAL_ENTRY = 0x02014b50;
/** At most this many entries are read: an Office document has dozens, not thousands. */
const MAX_ENTRIES = 10_000;

/** The names in a zip's central directory, or null when it has none to be found. */
function zipEntryNames(bytes: Buffer): Set<string> | null {
  // The end record is the last 22 bytes, unless a comment (at most 65,535 bytes) follows it.
  const earliest = Math.max(0, bytes.length - 22 - 0xffff);
  let eocd = -1;
  for (let i = bytes.length - 22; i >= earliest; i--) {
    if (bytes.readUInt32LE(i) === EOCD) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) return null;
  const count = Math.min(bytes.readUInt16LE(eocd + 10), MAX_ENTRIES);
  let at = bytes.readUInt32LE(eocd + 16);
  const names = new Set<string>();
  for (let n = 0; n < count; n++) {
    if (at + 46 > bytes.length || bytes.readUInt32LE(at) !== CENTRAL_ENTRY) return null;
    const nameLength = bytes.readUInt16LE(at + 28);
    const extraLength = bytes.readUInt16LE(at + 30);
    const commentLength = bytes.readUInt16LE(at + 32);
    if (at + 46 + nameLength > bytes.length) return null;
    names.add(bytes.toString('utf8', at + 46, at + 46 + nameLength));
    at += 46 + nameLength + extraLength + commentLength;
  }
  return names;
}
