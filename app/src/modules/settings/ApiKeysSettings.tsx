import { useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { components, paths } from '../../api/openapi.js';
import { queryClient, useQuery } from '../../lib/query.js';
import { Field } from '../../ui/AuthCard.js';
import { errorText } from '../../api/errors.js';
import { fullTime } from '../../lib/format.js';
import { ConfirmDialog } from '../../ui/ConfirmDialog.js';
import { CopyField } from '../../ui/Copy.js';
import './team/settings-screens.css';

type ApiKeySummary = components['schemas']['ApiKeySummary'];
type IssuedKey = paths['/v1/api-keys']['post']['responses'][201]['content']['application/json'];

const refresh = () => queryClient.invalidateQueries({ queryKey: keys.apiKeys() });
const label = (k: ApiKeySummary) => k.name ?? k.id;

/** Settings › API keys: the live keys (never the keys themselves), issue one, revoke one. */
export function ApiKeysSettings(_props: { rest: string[] }) {
  const list = useQuery<ApiKeySummary[]>({
    queryKey: keys.apiKeys(),
    queryFn: async ({ signal }) => (await data(api.GET('/v1/api-keys', { signal }))).data,
  });
  const [name, setName] = useState('');
  const [issued, setIssued] = useState<IssuedKey | null>(null);
  const [revoking, setRevoking] = useState<ApiKeySummary | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  const create = async (event: Event) => {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      const body = name.trim() ? { name: name.trim() } : {};
      setIssued(await data(api.POST('/v1/api-keys', { body })));
      setName('');
      await refresh();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setPending(false);
    }
  };

  return (
    <div class="screen">
      <div>
        <h1 id="page-title">API keys</h1>
        <p class="muted">
          A key acts as an admin of the account through the API. It is shown once, when it is
          created; only its hash is kept.
        </p>
      </div>
      <form class="inline-form" onSubmit={(e) => void create(e)}>
        <Field label="Key name" hint="Optional: what uses it (“CRM sync”).">
          <input value={name} maxLength={200} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <button type="submit" class="button primary" disabled={pending}>
          Create key
        </button>
      </form>
      {error && (
        <p role="alert" class="alert">
          {error}
        </p>
      )}
      {issued && (
        <section class="card notice" aria-labelledby="issued-title">
          <h2 id="issued-title">Your new key{issued.name ? `: ${issued.name}` : ''}</h2>
          <CopyField
            label="New API key"
            value={issued.api_key}
            hint="Copy it now: it is not shown again."
          />
          <div>
            <button type="button" class="button" onClick={() => setIssued(null)}>
              Done
            </button>
          </div>
        </section>
      )}
      <section class="stack" aria-labelledby="keys-title">
        <h2 id="keys-title">Live keys</h2>
        {list.isPending ? (
          <p class="muted">Loading keys…</p>
        ) : list.isError ? (
          <p role="alert" class="alert">
            {errorText(list.error)}
          </p>
        ) : (list.data ?? []).length === 0 ? (
          <p class="muted">No live key.</p>
        ) : (
          <div class="table-wrap">
            <table class="table">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Id</th>
                  <th scope="col">Created</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {(list.data ?? []).map((k) => (
                  <tr key={k.id}>
                    <th scope="row">{k.name ?? <span class="muted">Unnamed</span>}</th>
                    <td class="mono">{k.id}</td>
                    <td>{fullTime(k.created_at)}</td>
                    <td class="actions">
                      <button
                        type="button"
                        class="button small"
                        aria-label={`Revoke ${label(k)}`}
                        onClick={() => setRevoking(k)}
                      >
                        Revoke
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      {revoking && (
        <ConfirmDialog
          title={`Revoke ${label(revoking)}?`}
          action="Revoke"
          onClose={() => setRevoking(null)}
          onConfirm={async () => {
            await api.DELETE('/v1/api-keys/{id}', { params: { path: { id: revoking.id } } });
            if (issued?.id === revoking.id) setIssued(null);
            await refresh();
          }}
        >
          <p>Whatever uses this key is refused at once, and its event streams end.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}
