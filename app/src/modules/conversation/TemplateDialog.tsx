import { useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Conversation, Template } from '../../api/types.js';
import { useQuery } from '../../lib/query.js';
import { placeholderCount } from '../../lib/template-body.js';
import { Dialog } from '../../ui/Dialog.js';
import { TemplateFields } from '../templates/TemplateFields.js';
import { sendMessage } from './conversation-data.js';

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
          <TemplateFields
            templates={list}
            template={template}
            params={params}
            onTemplate={setName}
            onParams={setParams}
          />
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
