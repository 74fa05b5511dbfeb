import { useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Conversation, Template } from '../../api/types.js';
import { useQuery } from '../../lib/query.js';
import { Dialog } from '../../ui/Dialog.js';
import { sendMessage } from './conversation-data.js';

/** How many placeholders ({{1}}…{{n}}) a template body holds. */
export function placeholderCount(body: string): number {
  let n = 0;
  for (const m of body.matchAll(/\{\{(\d+)\}\}/g)) n = Math.max(n, Number(m[1]));
  return n;
}

export function preview(body: string, params: string[]): string {
  return body.replace(/\{\{(\d+)\}\}/g, (all, i: string) => params[Number(i) - 1] || all);
}

/** Outside the 24-hour window: an approved template, its parameters and a preview. */
export function TemplateDialog(props: { conversation: Conversation; onClose: () => void }) {
  const templates = useQuery<Template[]>({
    queryKey: keys.templates(),
    queryFn: async ({ signal }) =>
      (
        await data(api.GET('/v1/templates', { params: { query: { limit: 100 } }, signal }))
      ).data.filter((t) => t.status === 'approved'),
  });
  const [name, setName] = useState('');
  const [params, setParams] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const list = templates.data ?? [];
  const template = list.find((t) => t.name === name) ?? list[0];
  const count = template ? placeholderCount(template.body) : 0;

  const send = async (event: Event) => {
    event.preventDefault();
    if (!template) return;
    setSending(true);
    setError(null);
    try {
      await sendMessage(props.conversation, {
        type: 'template',
        template_name: template.name,
        template_params: Array.from({ length: count }, (_, i) => params[i] ?? ''),
      });
      props.onClose();
    } catch (err) {
      setError(err instanceof Error ? err.message : 'The template could not be sent.');
    } finally {
      setSending(false);
    }
  };

  return (
    <Dialog title="Send a template" onClose={props.onClose}>
      {templates.isPending ? (
        <p>Loading templates…</p>
      ) : list.length === 0 ? (
        <p>No approved template yet. An admin creates them under Settings.</p>
      ) : (
        <form onSubmit={(e) => void send(e)} class="stack">
          <label class="field">
            <span>Template</span>
            <select
              value={template?.name}
              onChange={(e) => {
                setName(e.currentTarget.value);
                setParams([]);
              }}
            >
              {list.map((t) => (
                <option key={t.id} value={t.name}>
                  {t.name} ({t.language})
                </option>
              ))}
            </select>
          </label>
          {Array.from({ length: count }, (_, i) => (
            <label class="field" key={`${template?.name}-${i}`}>
              <span>{`Parameter {{${i + 1}}}`}</span>
              <input
                required
                value={params[i] ?? ''}
                onInput={(e) => {
                  const next = [...params];
                  next[i] = e.currentTarget.value;
                  setParams(next);
                }}
              />
            </label>
          ))}
          <div>
            <p class="label">Preview</p>
            <p class="preview" aria-label="Preview">
              {template ? preview(template.body, params) : ''}
            </p>
          </div>
          {error && (
            <p role="alert" class="composer-error">
              {error}
            </p>
          )}
          <div class="dialog-actions">
            <button type="button" class="button ghost" onClick={props.onClose}>
              Cancel
            </button>
            <button type="submit" class="button primary" disabled={sending}>
              Send template
            </button>
          </div>
        </form>
      )}
    </Dialog>
  );
}
