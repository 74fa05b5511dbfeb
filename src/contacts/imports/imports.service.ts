import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Clock } from '../../clock.js';
import type { ReadCache } from '../../db/read-cache.js';
import type { Scope, Transactor } from '../../db/transactor.js';
import { NotFound, ValidationError } from '../../errors.js';
import type { Outbox } from '../../events/outbox.js';
import { newId } from '../../ids.js';
import { toContact } from '../contact.js';
import type { ContactRow } from '../contact-columns.js';
import type { ContactCursor, ContactFilter, ContactsRepository } from '../contacts.repository.js';
import type { Contact } from '../contacts.schema.js';
import { csvLine, CsvSyntaxError, readCsv } from './csv.js';
import { applyRow, differs, groupByPhone, newContact, valuesOf } from './import-rows.js';
import {
  CUSTOM_FIELD_PREFIX,
  FIXED_COLUMNS,
  readHeader,
  readRow,
  type Column,
  type ImportRow,
} from './import-columns.js';
import {
  ImportEnded,
  type ContactImportsRepository,
  ContactValues,
  type ImportCounts,
  type ImportError,
  type ImportRecord,
  type OnConflict,
} from './imports.repository.js';

/** What `GET /v1/contacts/imports/{id}` answers. */
export interface ImportReport extends ImportCounts {
  id: string;
  status: ImportRecord['status'];
  on_conflict: OnConflict;
  errors: ImportError[];
  created_at: string;
  updated_at: string;
}

/** Rows written per transaction (one statement each for the lookup, inserts and updates). */
const BATCH_ROWS = 2000;

/** Contacts read per statement of an export. */
const EXPORT_PAGE_ROWS = 5000;
/** The phone (always `+` and digits) is written without the formula escape. */
const PLAIN_CELLS = new Set([0]);

/** How often a running import tells the database it is alive (between its batches too). */
const HEARTBEAT_MS = 10_000;
/** An import `processing` without a heartbeat for this long was interrupted (its process stopped). */
const STALE_MS = 60_000;
/** The reason an interrupted import's report gives. */
export const INTERRUPTED =
  'interrupted: the service stopped before the import ended; the counts are the rows written, import the file again for the rest';

const noCounts = (): ImportCounts => ({
  total_rows: 0,
  created: 0,
  updated: 0,
  skipped: 0,
  failed: 0,
});

/**
 * CSV imports of contacts (DESIGN §6): the file, kept on disk while the request arrives, is
 * read a record at a time after the 202, and written a batch of rows per transaction, each
 * with its contacts' events and the import's progress. Every data row lands in exactly one of
 * created, updated, skipped and failed.
 */
export class ContactImportsService {
  /** Imports running in this process (the app waits for them when it closes). */
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly deps: {
      tx: Transactor;
      contacts: ContactsRepository;
      imports: ContactImportsRepository;
      outbox: Outbox;
      clock: Clock;
      cache: ReadCache<Contact>;
      /** Bytes an import's file may have (IMPORT_MAX_BYTES). */
      maxBytes: number;
      /** Told of an import that stopped on an error of ours. */
      onError?: (err: unknown) => void;
      batchRows?: number;
      /** HEARTBEAT_MS and STALE_MS, shorter in tests. */
      heartbeatMs?: number;
      staleAfterMs?: number;
    },
  ) {}

  /**
   * Marks failed, with the reason, every import whose process stopped (no heartbeat for
   * STALE_MS): the file was on that process's disk, so it cannot be resumed elsewhere. Run by
   * the workers when the service starts and every minute (scheduleImportSweep).
   */
  async sweep(): Promise<number> {
    const now = this.deps.clock.now();
    return this.deps.imports.failStale(this.staleBefore(now), now, INTERRUPTED);
  }

  private staleBefore(now: Date): Date {
    return new Date(now.getTime() - (this.deps.staleAfterMs ?? STALE_MS));
  }

  get maxBytes(): number {
    return this.deps.maxBytes;
  }

  /**
   * Checks the file's header (a 422 naming an unknown column), records the import and starts it
   * in the background; the file is removed once it is read. The file is the caller's until
   * this resolves, then the import's.
   */
  async start(
    scope: Scope,
    file: string,
    onConflict: OnConflict,
  ): Promise<{ id: string; status: 'processing' }> {
    const columns = await readFileHeader(file);
    const id = newId('imp');
    const answer = { id, status: 'processing' as const };
    await this.deps.tx.run(scope, async (trx) => {
      await this.deps.imports.create(trx, scope.accountId, id, onConflict, this.deps.clock.now());
      return answer;
    });
    const work = { accountId: scope.accountId, actor: scope.actor };
    const job: Promise<void> = this.run(work, id, file, columns, onConflict)
      .catch((err) => this.deps.onError?.(err))
      .finally(() => {
        this.running.delete(job);
        void rm(file, { force: true });
      });
    this.running.add(job);
    return answer;
  }

  /** Resolves once every import running in this process has ended. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  /**
   * The contacts the filter passes as CSV, newest first, in the import's columns (one
   * `custom_fields.<key>` column per key any of them has), read a page at a time as the client
   * takes them: memory stays flat however many there are.
   */
  async *export(scope: Scope, filter: ContactFilter): AsyncGenerator<string> {
    const keys = await this.deps.contacts.customFieldKeys(scope.accountId, filter);
    yield csvLine([...FIXED_COLUMNS, ...keys.map((k) => `${CUSTOM_FIELD_PREFIX}${k}`)]);
    let cursor: ContactCursor | null = null;
    for (;;) {
      const rows = await this.deps.contacts.exportPage(
        scope.accountId,
        filter,
        cursor,
        EXPORT_PAGE_ROWS,
      );
      let text = '';
      for (const c of rows) {
        const fields = keys.map((k) => {
          const value = c.custom_fields[k];
          return value === undefined ? null : String(value);
        });
        text += csvLine(
          [c.phone, c.name, c.email, c.tags.join(';'), c.lifecycle_stage, ...fields],
          PLAIN_CELLS,
        );
      }
      if (text !== '') yield text;
      const last = rows.at(-1);
      if (!last || rows.length < EXPORT_PAGE_ROWS) return;
      cursor = { created_at: last.cursor_at, id: last.id };
    }
  }

  async get(scope: Scope, id: string): Promise<ImportReport> {
    let found = await this.deps.imports.find(scope.accountId, id);
    if (found?.record.status === 'processing') {
      // Interrupted before the sweep came by: said so now rather than `processing` for ever.
      const now = this.deps.clock.now();
      const one = { accountId: scope.accountId, id };
      if (await this.deps.imports.failStale(this.staleBefore(now), now, INTERRUPTED, one))
        found = await this.deps.imports.find(scope.accountId, id);
    }
    if (!found) throw new NotFound('import', id);
    const { record, errors } = found;
    return {
      id: record.id,
      status: record.status,
      on_conflict: record.on_conflict,
      total_rows: record.total_rows,
      created: record.created,
      updated: record.updated,
      skipped: record.skipped,
      failed: record.failed,
      errors,
      created_at: record.created_at.toISOString(),
      updated_at: record.updated_at.toISOString(),
    };
  }

  private async run(
    scope: Scope,
    id: string,
    file: string,
    columns: Column[],
    onConflict: OnConflict,
  ): Promise<void> {
    const batchRows = this.deps.batchRows ?? BATCH_ROWS;
    let rows: ImportRow[] = [];
    let counts = noCounts();
    let errors: ImportError[] = [];
    // The batch being written while the next one is read and checked: batches are written one
    // after another, in the file's order (a phone's later rows must find what its earlier ones
    // made), but reading and writing overlap.
    let writing: Promise<void> = Promise.resolve();
    const flush = async (status?: 'completed' | 'failed', more: ImportError[] = []) => {
      const batch = { rows, counts, errors: [...errors, ...more] };
      rows = [];
      counts = noCounts();
      errors = [];
      await writing;
      writing = this.writeBatch(scope, id, onConflict, batch, status);
      // Its failure is met where it is awaited: by the next flush, or at the end.
      writing.catch(() => undefined);
    };
    const beat = setInterval(() => {
      this.deps.imports
        .heartbeat(scope.accountId, id, this.deps.clock.now())
        .catch((err: unknown) => this.deps.onError?.(err));
    }, this.deps.heartbeatMs ?? HEARTBEAT_MS);
    beat.unref();
    try {
      let header = true;
      for await (const records of readCsv(createReadStream(file))) {
        for (const record of records) {
          if (header) {
            header = false;
            continue;
          }
          const read = readRow(columns, record.cells, record.line);
          if ('errors' in read) {
            counts.total_rows++;
            counts.failed++;
            errors.push(...read.errors);
            continue;
          }
          rows.push(read.row);
          if (rows.length >= batchRows) await flush();
        }
        if (errors.length >= batchRows) await flush();
      }
      await flush('completed');
      await writing;
    } catch (thrown) {
      let err = thrown;
      if (err instanceof CsvSyntaxError) {
        try {
          await flush('failed', [{ line: err.line, field: 'file', issue: err.message }]);
          await writing;
          return;
        } catch (during) {
          // The batch before the bad record failed to be written.
          err = during;
        }
      }
      // Declared interrupted meanwhile (no heartbeat for too long): its report says so.
      if (err instanceof ImportEnded) return;
      // Whatever was being written ends first (it fails, or its rows count).
      await writing.catch(() => undefined);
      await this.deps.imports.progress(
        this.deps.tx.db,
        scope.accountId,
        id,
        noCounts(),
        [{ line: 0, field: 'import', issue: 'stopped by an error of the service; import again' }],
        this.deps.clock.now(),
        'failed',
      );
      throw err;
    } finally {
      clearInterval(beat);
    }
  }

  /**
   * One transaction: the batch's rows written (the existing contacts locked and updated in one
   * statement, the new ones inserted in one), their events and tags, and the import's counts.
   * A phone repeated in the batch is folded here: its later rows update what its earlier ones
   * made, each with its own event, and the contact is written once with the last values.
   */
  private async writeBatch(
    scope: Scope,
    id: string,
    onConflict: OnConflict,
    batch: { rows: ImportRow[]; counts: ImportCounts; errors: ImportError[] },
    status?: 'completed' | 'failed',
  ): Promise<void> {
    const { accountId } = scope;
    const changed: string[] = [];
    try {
      await this.deps.tx.run(scope, async (trx) => {
        const now = this.deps.clock.now();
        const counts = { ...batch.counts };
        const errors = [...batch.errors];
        counts.total_rows += batch.rows.length;
        const byPhone = groupByPhone(batch.rows);
        const existing = await this.deps.contacts.lockManyByPhone(
          trx,
          accountId,
          [...byPhone.keys()],
          'no key update',
        );
        const found = new Map(existing.map((c) => [c.phone!, c]));
        const creates: ContactRow[] = [];
        const updates: ContactValues[] = [];
        /** Each phone's events, in its rows' order. */
        const eventsOf = new Map<string, ImportEvent[]>();
        for (const [phone, rows] of byPhone) {
          const events: ImportEvent[] = [];
          eventsOf.set(phone, events);
          const before = found.get(phone);
          let current: ContactRow;
          let rest: ImportRow[];
          if (before) {
            current = before;
            rest = rows;
          } else {
            current = newContact(accountId, rows[0]!, now);
            creates.push(current);
            events.push({
              type: 'contact.created',
              data: toContact(current, []),
              line: rows[0]!.line,
            });
            rest = rows.slice(1);
          }
          const identities = before?.identities ?? [];
          for (const row of rest) {
            if (onConflict === 'skip') {
              counts.skipped++;
              continue;
            }
            counts.updated++;
            const values = applyRow(current, row);
            if (!differs(current, values)) continue;
            current = { ...current, ...values, updated_at: now };
            events.push({
              type: 'contact.updated',
              data: toContact(current, identities),
              line: row.line,
            });
          }
          if (before && current !== before) {
            updates.push(valuesOf(current));
            changed.push(before.id);
          } else if (!before && current !== creates.at(-1)) {
            creates[creates.length - 1] = current;
          }
        }
        const inserted = await this.deps.contacts.insertManyIfPhoneFree(trx, creates);
        const tags = new Set<string>();
        const events: { type: ImportEvent['type']; data: Contact; line: number }[] = [];
        for (const row of creates) {
          const rows = byPhone.get(row.phone!)!;
          if (!inserted.has(row.id)) {
            // Taken by a contact created since this batch looked (a message, a request): the
            // phone's rows are refused, each reported, and its events dropped with them.
            for (const r of rows) {
              errors.push({
                line: r.line,
                field: 'phone',
                issue: 'was taken meanwhile; import the row again',
              });
            }
            counts.failed += rows.length;
            counts.updated -= onConflict === 'skip' ? 0 : rows.length - 1;
            counts.skipped -= onConflict === 'skip' ? rows.length - 1 : 0;
            eventsOf.delete(row.phone!);
            continue;
          }
          counts.created++;
        }
        // Every tag a row gave, even one a later row of its phone replaced.
        for (const list of eventsOf.values()) {
          for (const e of list) for (const tag of e.data.tags) tags.add(tag);
          events.push(...list);
        }
        // The events in the file's order, as the rows came.
        events.sort((a, b) => a.line - b.line);
        await this.deps.imports.updateMany(trx, accountId, updates, now);
        await this.deps.contacts.addTags(trx, accountId, [...tags].sort(), now);
        await this.deps.outbox.recordMany(
          trx,
          accountId,
          events.map((e) => ({ type: e.type, data: e.data, actor: scope.actor })),
        );
        await this.deps.imports.progress(trx, accountId, id, counts, errors, now, status);
      });
    } finally {
      for (const contactId of changed) this.deps.cache.invalidate(`${accountId} ${contactId}`);
    }
  }
}

interface ImportEvent {
  type: 'contact.created' | 'contact.updated';
  data: Contact;
  line: number;
}

/** The header of the file, checked (a 422 when it is not one, or names an unknown column). */
async function readFileHeader(file: string): Promise<Column[]> {
  const stream = createReadStream(file);
  try {
    for await (const records of readCsv(stream)) {
      const first = records[0];
      if (first) return readHeader(first.cells);
    }
  } catch (err) {
    if (err instanceof CsvSyntaxError) throw new ValidationError('header', err.message);
    throw err;
  } finally {
    stream.destroy();
  }
  throw new ValidationError('body', 'must start with a header row naming its columns');
}

/**
 * The sweep of interrupted imports (ContactImportsService.sweep), now and every `everyMs`; the
 * returned function stops it. Run by the workers.
 */
export function scheduleImportSweep(
  imports: Pick<ContactImportsService, 'sweep'>,
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void },
  everyMs = STALE_MS,
): () => void {
  let running = false;
  const run = () => {
    if (running) return;
    running = true;
    imports
      .sweep()
      .then((n) => {
        if (n > 0) log.info({ imports: n }, 'contact imports interrupted by a stop marked failed');
      })
      .catch((err: unknown) => log.warn({ err }, 'the sweep of interrupted imports failed'))
      .finally(() => (running = false));
  };
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
