// Column mapping for an import: the file's header row is read in the browser, each column
// mapped to one of the import's columns, and the header rewritten before the upload (the rest
// of the file is sent as it is, never read whole).

export const IMPORT_COLUMNS = ['phone', 'name', 'email', 'tags', 'lifecycle_stage'] as const;

/** The header line's cells (quoted cells taken as RFC 4180 writes them) and its byte length. */
export async function readHeader(file: Blob): Promise<{ cells: string[]; bytes: number }> {
  const head = new Uint8Array(await file.slice(0, 64 * 1024).arrayBuffer());
  let end = head.indexOf(0x0a);
  if (end < 0) end = head.length;
  const bytes = end < head.length ? end + 1 : end;
  let text = new TextDecoder().decode(head.subarray(0, end));
  text = text.replace(/^\uFEFF/, '').replace(/\r$/, '');
  const cells: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      cells.push(cell.trim());
      cell = '';
    } else cell += c;
  }
  cells.push(cell.trim());
  return { cells, bytes };
}

/** The column a header cell most likely means: itself if it is one, else a custom field. */
export function guessColumn(cell: string): string {
  const name = cell.trim().toLowerCase();
  if ((IMPORT_COLUMNS as readonly string[]).includes(name)) return name;
  if (name.startsWith('custom_fields.')) return name;
  if (/phone|mobile|whatsapp|number/.test(name)) return 'phone';
  if (/e-?mail/.test(name)) return 'email';
  if (/name/.test(name)) return 'name';
  if (/tag|label/.test(name)) return 'tags';
  if (/stage|lifecycle|status/.test(name)) return 'lifecycle_stage';
  return `custom_fields.${fieldKey(name)}`;
}

/** A custom field key made of a header: a-z, 0-9 and _. */
export function fieldKey(name: string): string {
  return (
    name
      .toLowerCase()
      .replace(/[^a-z0-9_]+/g, '_')
      .replace(/^_+|_+$/g, '')
      .slice(0, 64) || 'field'
  );
}

/** The file with its header replaced by `columns` (the rest of its bytes untouched). */
export function withHeader(file: Blob, headerBytes: number, columns: string[]): Blob {
  return new Blob([`${columns.join(',')}\r\n`, file.slice(headerBytes)], { type: 'text/csv' });
}
