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

/** The import was ended meanwhile (declared interrupted): its batch is not written. */
export class ImportEnded extends Error {
  constructor(readonly importId: string) {
    super(`import ${importId} is no longer processing`);
  }
}

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
      INSERT INTO contact_imports (account_id, id, status, on_conflict, created_at, updated_at, heartbeat_at)
      VALUES (${accountId}, ${id}, 'processing', ${onConflict}, ${now}, ${now}, ${now})`.execute(
      trx,
    );
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

  /**
   * A batch's counts added and its refused rows kept, in the batch's transaction. Throws
   * ImportEnded when the import is no longer `processing` (the sweep declared it interrupted),
   * so that the batch rolls back and the import stops.
   */
  async progress(
    trx: Tx | Db,
    accountId: string,
    id: string,
    counts: ImportCounts,
    errors: ImportError[],
    now: Date,
    status?: ImportStatus,
  ): Promise<void> {
    const moved = await sql`
      UPDATE contact_imports SET
        total_rows = total_rows + ${counts.total_rows}, created = created + ${counts.created},
        updated = updated + ${counts.updated}, skipped = skipped + ${counts.skipped},
        failed = failed + ${counts.failed}, updated_at = ${now}, heartbeat_at = ${now},
        status = coalesce(${status ?? null}, status)
      WHERE account_id = ${accountId} AND id = ${id} AND status = 'processing'`.execute(trx);
    if (Number(moved.numAffectedRows ?? 0n) === 0) throw new ImportEnded(id);
    if (errors.length === 0) return;
    await sql`
      INSERT INTO contact_import_errors (account_id, import_id, line, field, issue)
      SELECT ${accountId}, ${id}, e.line, e.field, e.issue
      FROM unnest(${errors.map((e) => e.line)}::int[], ${errors.map((e) => e.field)}::text[],
                  ${errors.map((e) => e.issue)}::text[]) AS e(line, field, issue)`.execute(trx);
  }

  /** The import's process is still at it (between batches). */
  async heartbeat(accountId: string, id: string, now: Date): Promise<void> {
    await sql`
      UPDATE contact_imports SET heartbeat_at = ${now}
      WHERE account_id = ${accountId} AND id = ${id} AND status = 'processing'`.execute(this.db);
  }

  /**
   * Imports still `processing` whose heartbeat is older than `before` (their process stopped)
   * marked failed with `issue`, all of them or the one named; returns how many.
   */
  async failStale(
    before: Date,
    now: Date,
    issue: string,
    one?: { accountId: string; id: string },
  ): Promise<number> {
    const result = await sql<{ import_id: string }>`
      WITH stale AS (
        UPDATE contact_imports SET status = 'failed', updated_at = ${now}
        WHERE status = 'processing' AND heartbeat_at < ${before}
          ${one ? sql`AND account_id = ${one.accountId} AND id = ${one.id}` : sql``}
        RETURNING account_id, id
      )
      INSERT INTO contact_import_errors (account_id, import_id, line, field, issue)
      SELECT account_id, id, 0, 'import', ${issue} FROM stale
      RETURNING import_id`.execute(this.db);
    return result.rows.length;
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
