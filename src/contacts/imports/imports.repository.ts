import { sql } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { CustomFieldValue } from '../../db/schema.js';

export type ImportStatus = 'processing' | 'completed' | 'failed';
export type OnConflict = 'update' | 'skip';

export interface ImportCounts {
  total_rows: number;
  created: number;
  updated: number;
  skipped: number;
  failed: number;
}

export interface ImportRecord extends ImportCounts {
  id: string;
  status: ImportStatus;
  on_conflict: OnConflict;
  created_at: Date;
  updated_at: Date;
}

export interface ImportError {
  line: number;
  field: string;
  issue: string;
}

/** A contact's new values, whole, for updateMany. */
export interface ContactValues {
  id: string;
  name: string | null;
  email: string | null;
  tags: string[];
  lifecycle_stage: string | null;
  custom_fields: Record<string, CustomFieldValue>;
}

/** The errors an import's report lists; `failed` counts every refused row all the same. */
export const MAX_REPORTED_ERRORS = 10_000;

/** Imports of contacts from CSV: their progress and refused rows, and the writes of a batch. */
export class ContactImportsRepository {
  constructor(private readonly db: Db) {}

  async create(
    trx: Tx,
    accountId: string,
    id: string,
    onConflict: OnConflict,
    now: Date,
  ): Promise<void> {
    await sql`
      INSERT INTO contact_imports (account_id, id, status, on_conflict, created_at, updated_at)
      VALUES (${accountId}, ${id}, 'processing', ${onConflict}, ${now}, ${now})`.execute(trx);
  }

  async find(
    accountId: string,
    id: string,
  ): Promise<{ record: ImportRecord; errors: ImportError[] } | undefined> {
    const [found, errors] = await Promise.all([
      sql<ImportRecord>`
        SELECT id, status, on_conflict, total_rows, created, updated, skipped, failed, created_at, updated_at
        FROM contact_imports WHERE account_id = ${accountId} AND id = ${id}`.execute(this.db),
      sql<ImportError>`
        SELECT line, field, issue FROM contact_import_errors
        WHERE account_id = ${accountId} AND import_id = ${id}
        ORDER BY line LIMIT ${MAX_REPORTED_ERRORS}`.execute(this.db),
    ]);
    const record = found.rows[0];
    return record && { record, errors: errors.rows };
  }

  /** A batch's counts added and its refused rows kept, in the batch's transaction. */
  async progress(
    trx: Tx | Db,
    accountId: string,
    id: string,
    counts: ImportCounts,
    errors: ImportError[],
    now: Date,
    status?: ImportStatus,
  ): Promise<void> {
    await sql`
      UPDATE contact_imports SET
        total_rows = total_rows + ${counts.total_rows}, created = created + ${counts.created},
        updated = updated + ${counts.updated}, skipped = skipped + ${counts.skipped},
        failed = failed + ${counts.failed}, updated_at = ${now},
        status = coalesce(${status ?? null}, status)
      WHERE account_id = ${accountId} AND id = ${id}`.execute(trx);
    if (errors.length === 0) return;
    await sql`
      INSERT INTO contact_import_errors (account_id, import_id, line, field, issue)
      SELECT ${accountId}, ${id}, e.line, e.field, e.issue
      FROM unnest(${errors.map((e) => e.line)}::int[], ${errors.map((e) => e.field)}::text[],
                  ${errors.map((e) => e.issue)}::text[]) AS e(line, field, issue)`.execute(trx);
  }

  /** These contacts' fields replaced by the values given, in one statement. */
  async updateMany(trx: Tx, accountId: string, values: ContactValues[], now: Date): Promise<void> {
    if (values.length === 0) return;
    await sql`
      UPDATE contacts c SET name = v.name, email = v.email, tags = v.tags,
        lifecycle_stage = v.lifecycle_stage, custom_fields = v.custom_fields, updated_at = ${now}
      FROM jsonb_to_recordset(${JSON.stringify(values)}::jsonb)
        AS v(id text, name text, email text, tags text[], lifecycle_stage text, custom_fields jsonb)
      WHERE c.account_id = ${accountId} AND c.id = v.id`.execute(trx);
  }
}
