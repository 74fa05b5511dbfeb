import { parse } from 'csv-parse';
import type { Readable } from 'node:stream';

// Reading and writing CSV, a record at a time: a file is never held whole.

/** The longest record read (a quote left open would otherwise gather the rest of the file). */
const MAX_RECORD_BYTES = 1024 * 1024;

/** A record, with the file's line it starts on (the first line is 1). */
export interface CsvRecord {
  line: number;
  cells: string[];
}

/** The file is not CSV from `line` on (a quote left open, a character after a closing quote). */
export class CsvSyntaxError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The records of a CSV stream (RFC 4180: quoted cells may hold commas, quotes and line breaks;
 * rows end with CRLF or LF; a UTF-8 byte order mark is dropped; empty lines are skipped), read
 * as the stream arrives, each with the line it starts on. Throws CsvSyntaxError where the text
 * stops being CSV.
 */
export async function* readCsv(input: Readable): AsyncGenerator<CsvRecord[]> {
  let queue: CsvRecord[] = [];
  let lastLine = 0;
  let lastEmpty = 0;
  let failure: Error | undefined;
  const parser = parse({
    bom: true,
    encoding: 'utf8',
    relax_column_count: true,
    skip_empty_lines: true,
    record_delimiter: ['\r\n', '\n'],
    max_record_size: MAX_RECORD_BYTES,
    on_record: (cells: string[], info: { lines: number; empty_lines: number }) => {
      queue.push({ line: lastLine + 1 + (info.empty_lines - lastEmpty), cells });
      lastLine = info.lines;
      lastEmpty = info.empty_lines;
      return null; // taken here, not pushed to the stream
    },
  });
  parser.on('error', (err) => {
    failure = err;
  });
  parser.resume();
  const fed = (chunk?: Buffer) =>
    new Promise<void>((resolve) => {
      if (chunk === undefined) {
        parser.once('end', resolve);
        parser.once('error', () => resolve());
        parser.end();
      } else {
        parser.write(chunk, () => resolve());
      }
    });
  const syntax = () =>
    new CsvSyntaxError(
      lastLine + 1,
      `the file is not valid CSV from here: ${failure!.message.replace(/ at line \d+.*$/s, '')}`,
    );
  for await (const chunk of input as AsyncIterable<Buffer>) {
    if (failure) break;
    await fed(chunk);
    if (queue.length > 0) {
      yield queue;
      queue = [];
    }
  }
  if (!failure) await fed();
  if (queue.length > 0) yield queue;
  if (failure) throw syntax();
}

/** Cells starting with one of these are read as formulas by spreadsheets. */
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * One CSV line (CRLF-terminated): a cell is quoted when it holds a comma, a quote, a line break
 * or spaces at either end. A cell that starts with = + - @ (or a tab or carriage return) gets a
 * `'` before it, so that a spreadsheet shows it as text instead of running it as a formula
 * (OWASP "CSV injection"); an import takes that `'` off again. `plain` cells (the phone, always
 * `+` and digits) are written as they are.
 */
export function csvLine(cells: (string | null)[], plain: ReadonlySet<number> = new Set()): string {
  return (
    cells
      .map((cell, i) => {
        if (cell === null || cell === '') return '';
        const text = !plain.has(i) && FORMULA_START.test(cell) ? `'${cell}` : cell;
        return /[",\r\n]|^\s|\s$/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
      })
      .join(',') + '\r\n'
  );
}
