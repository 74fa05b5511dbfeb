import { useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import { queryClient, useAction, useQuery } from '../../lib/query.js';
import { onLinkClick } from '../../lib/router.js';
import { fieldKey, guessColumn, IMPORT_COLUMNS, readHeader, withHeader } from './csv-header.js';

interface ImportReport {
  id: string;
  status: 'processing' | 'completed' | 'failed';
  total_rows: number;
  created: number;
  updated: number;
  skipped: number;
  failed: number;
  errors: { line: number; field: string; issue: string }[];
}

const COLUMN_LABELS: Record<(typeof IMPORT_COLUMNS)[number], string> = {
  phone: 'Phone',
  name: 'Name',
  email: 'Email',
  tags: 'Tags (separated by ;)',
  lifecycle_stage: 'Lifecycle stage',
};

/**
 * Import (admins): pick a CSV file, map each of its columns to a contact field, upload it with
 * its header rewritten, then follow the import's report.
 */
export function ContactImport() {
  const [file, setFile] = useState<File | null>(null);
  const [header, setHeader] = useState<{ cells: string[]; bytes: number } | null>(null);
  const [mapping, setMapping] = useState<string[]>([]);
  const [onConflict, setOnConflict] = useState<'update' | 'skip'>('update');
  const [importId, setImportId] = useState<string | null>(null);

  const pick = async (picked: File | null) => {
    setFile(picked);
    setImportId(null);
    if (!picked) return setHeader(null);
    const read = await readHeader(picked);
    setHeader(read);
    setMapping(read.cells.map(guessColumn));
  };
  const upload = useAction(async () => {
    const body = withHeader(file!, header!.bytes, mapping);
    // The file goes as it is (a Blob), its header rewritten; the client adds the CSRF token.
    const started = await data(
      api.POST('/v1/contacts/imports', {
        params: { query: { on_conflict: onConflict } },
        body: body as unknown as string,
        bodySerializer: (b: unknown) => b as BodyInit,
        headers: { 'Content-Type': 'text/csv' },
      }),
    );
    setImportId(started.id);
  });
  const repeated = mapping.filter((m, i) => mapping.indexOf(m) !== i);
  const ready = file && header && mapping.includes('phone') && repeated.length === 0;

  return (
    <div class="contacts-admin">
      <a href="/app/contacts" class="back-link" onClick={onLinkClick('/contacts')}>
        ← All contacts
      </a>
      <h1 id="page-title">Import contacts</h1>
      <p class="muted">
        A CSV file with a header row. A row whose phone belongs to a contact updates it; an empty
        cell leaves its field as it is.
      </p>
      <label class="field">
        <span>CSV file</span>
        <input
          type="file"
          accept=".csv,text/csv"
          onChange={(e) => void pick(e.currentTarget.files?.[0] ?? null)}
        />
      </label>
      {header && (
        <form
          class="import-mapping"
          onSubmit={(e) => {
            e.preventDefault();
            void upload.run();
          }}
        >
          <fieldset>
            <legend>Columns</legend>
            {header.cells.map((cell, i) => (
              <label class="field mapping-row" key={i}>
                <span>{cell || `Column ${i + 1}`}</span>
                <select
                  value={mapping[i]}
                  onChange={(e) => {
                    const next = [...mapping];
                    next[i] = e.currentTarget.value;
                    setMapping(next);
                  }}
                >
                  {IMPORT_COLUMNS.map((c) => (
                    <option key={c} value={c}>
                      {COLUMN_LABELS[c]}
                    </option>
                  ))}
                  <option value={`custom_fields.${fieldKey(cell)}`}>
                    Custom field “{fieldKey(cell)}”
                  </option>
                </select>
              </label>
            ))}
          </fieldset>
          <label class="field">
            <span>When a phone is already a contact</span>
            <select
              value={onConflict}
              onChange={(e) => setOnConflict(e.currentTarget.value as 'update' | 'skip')}
            >
              <option value="update">Update the contact</option>
              <option value="skip">Skip the row</option>
            </select>
          </label>
          {!mapping.includes('phone') && (
            <p role="alert">One column must be the phone: rows are matched by it.</p>
          )}
          {repeated.length > 0 && <p role="alert">Each field can take one column only.</p>}
          {upload.error && <p role="alert">{upload.error.message}</p>}
          <div class="form-actions">
            <button type="submit" class="button primary" disabled={!ready || upload.pending}>
              Upload
            </button>
          </div>
        </form>
      )}
      {importId && <ImportReportView id={importId} />}
    </div>
  );
}

function ImportReportView({ id }: { id: string }) {
  const report = useQuery<ImportReport>({
    queryKey: keys.contactImport(id),
    queryFn: ({ signal }) =>
      data(api.GET('/v1/contacts/imports/{id}', { params: { path: { id } }, signal })),
    refetchInterval: (query) => (query.state.data?.status === 'processing' ? 1000 : false),
  });
  const r = report.data;
  if (r && r.status !== 'processing')
    void queryClient.invalidateQueries({ queryKey: keys.contactLists() });
  return (
    <section class="import-report" aria-labelledby="import-report-title">
      <h2 id="import-report-title">Import report</h2>
      {!r ? (
        <p class="muted">Uploading…</p>
      ) : (
        <>
          <p role="status">
            {r.status === 'processing'
              ? `Importing… ${r.total_rows.toLocaleString('en')} rows read`
              : r.status === 'completed'
                ? 'Import completed.'
                : 'Import failed.'}
          </p>
          <dl class="import-counts">
            <dt>Rows</dt>
            <dd>{r.total_rows}</dd>
            <dt>Created</dt>
            <dd>{r.created}</dd>
            <dt>Updated</dt>
            <dd>{r.updated}</dd>
            <dt>Skipped</dt>
            <dd>{r.skipped}</dd>
            <dt>Failed</dt>
            <dd>{r.failed}</dd>
          </dl>
          {r.errors.length > 0 && (
            <table class="contacts-table" aria-label="Refused rows">
              <thead>
                <tr>
                  <th scope="col">Line</th>
                  <th scope="col">Field</th>
                  <th scope="col">Issue</th>
                </tr>
              </thead>
              <tbody>
                {r.errors.map((e, i) => (
                  <tr key={i}>
                    <td>{e.line}</td>
                    <td>{e.field}</td>
                    <td>{e.issue}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}
