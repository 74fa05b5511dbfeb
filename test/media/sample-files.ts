import { crc32 } from 'node:zlib';

/** A zip of stored (uncompressed) entries, as Office and OpenDocument files are containers of. */
export function zip(entries: { name: string; data: string | Buffer }[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const data = Buffer.isBuffer(entry.data) ? entry.data : Buffer.from(entry.data, 'utf8');
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, data);
    centrals.push(central, name);
    offset += 30 + name.length + data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

const CONTENT_TYPES = '<?xml version="1.0"?><Types/>';
const ooxml = (folder: string, part: string) =>
  zip([
    { name: '[Content_Types].xml', data: CONTENT_TYPES },
    { name: '_rels/.rels', data: '<Relationships/>' },
    { name: `${folder}/${part}`, data: '<x/>' },
  ]);

/** An OLE2 compound file whose directory names these streams (UTF-16LE, as Office writes them). */
function ole2(...streams: string[]): Buffer {
  const header = Buffer.alloc(512);
  Buffer.from('d0cf11e0a1b11ae1', 'hex').copy(header);
  const directory = Buffer.alloc(512);
  let at = 0;
  for (const name of ['Root Entry', ...streams]) {
    Buffer.from(`${name}\0`, 'utf16le').copy(directory, at);
    at += 128;
  }
  return Buffer.concat([header, directory]);
}

/** One file of each accepted type, made by hand with the bytes that make it that type. */
export const ACCEPTED = {
  jpeg: {
    bytes: Buffer.concat([Buffer.from('ffd8ffe000104a46494600', 'hex'), Buffer.alloc(64, 7)]),
    contentType: 'image/jpeg',
    ext: 'jpg',
  },
  png: {
    bytes: Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex'),
    contentType: 'image/png',
    ext: 'png',
  },
  webp: {
    bytes: Buffer.concat([
      Buffer.from('RIFF'),
      Buffer.from([0x24, 0, 0, 0]),
      Buffer.from('WEBPVP8 '),
      Buffer.alloc(28, 1),
    ]),
    contentType: 'image/webp',
    ext: 'webp',
  },
  pdf: { bytes: Buffer.from('%PDF-1.7\n%invoice\n'), contentType: 'application/pdf', ext: 'pdf' },
  doc: { bytes: ole2('WordDocument', '1Table'), contentType: 'application/msword', ext: 'doc' },
  xls: { bytes: ole2('Workbook'), contentType: 'application/vnd.ms-excel', ext: 'xls' },
  ppt: {
    bytes: ole2('PowerPoint Document', 'Current User'),
    contentType: 'application/vnd.ms-powerpoint',
    ext: 'ppt',
  },
  docx: {
    bytes: ooxml('word', 'document.xml'),
    contentType: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    ext: 'docx',
  },
  xlsx: {
    bytes: ooxml('xl', 'workbook.xml'),
    contentType: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    ext: 'xlsx',
  },
  pptx: {
    bytes: ooxml('ppt', 'presentation.xml'),
    contentType: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
    ext: 'pptx',
  },
  odt: {
    bytes: zip([
      { name: 'mimetype', data: 'application/vnd.oasis.opendocument.text' },
      { name: 'content.xml', data: '<office:document-content/>' },
    ]),
    contentType: 'application/vnd.oasis.opendocument.text',
    ext: 'odt',
  },
};

/** Files of no accepted type, some dressed up as one. */
export const REFUSED = {
  exe: Buffer.concat([Buffer.from('MZ'), Buffer.alloc(62), Buffer.from('PE\0\0')]),
  zip: zip([{ name: 'readme.txt', data: 'hello' }]),
  zipWithContentTypesOnly: zip([{ name: '[Content_Types].xml', data: CONTENT_TYPES }]),
  msi: ole2('SummaryInformation'),
  text: Buffer.from('just some text, not a document\n'),
  html: Buffer.from('<!doctype html><script>alert(1)</script>'),
  gif: Buffer.from('GIF89a\x01\x00\x01\x00', 'latin1'),
};

/** A multipart/form-data body of these parts (a part with `filename` is a file). */
export function multipart(
  parts: { name: string; filename?: string; type?: string; data: string | Buffer }[],
  boundary = `----switchboard${Math.random().toString(16).slice(2)}`,
): { payload: Buffer; headers: Record<string, string> } {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    const type = p.type ? `\r\nContent-Type: ${p.type}` : '';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`));
    chunks.push(Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return {
    payload: Buffer.concat(chunks),
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
  };
}

/** The body of an upload of one file. */
export function fileUpload(data: Buffer, filename = 'file.bin', type = 'application/octet-stream') {
  return multipart([{ name: 'file', filename, type, data }]);
}
