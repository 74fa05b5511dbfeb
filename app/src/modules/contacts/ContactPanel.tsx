import { useEffect, useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Contact, Conversation } from '../../api/types.js';
import { channelName, displayName, shortTime } from '../../lib/format.js';
import { queryClient, useQuery } from '../../lib/query.js';
import { onLinkClick } from '../../lib/router.js';
import { Avatar } from '../../ui/Avatar.js';
import { saveContact, STAGES, type Stage } from './contact-edit.js';

type Field = { key: string; value: string };
type Said = { error: boolean; text: string } | null;

/** The contact of a conversation: shown, edited, and its other conversations. */
export function ContactPanel(props: { contactId: string; conversationId: string }) {
  const contact = useQuery<Contact>({
    queryKey: keys.contact(props.contactId),
    queryFn: ({ signal }) =>
      data(api.GET('/v1/contacts/{id}', { params: { path: { id: props.contactId } }, signal })),
  });
  // Kept here: a save refetches the contact, and the form starts again from what was saved.
  const [said, setSaid] = useState<Said>(null);
  useEffect(() => setSaid(null), [props.contactId]);
  return (
    <section class="contact-panel" aria-label="Contact">
      {contact.data ? (
        <ContactForm
          key={contact.data.updated_at}
          contact={contact.data}
          said={said}
          onSaid={setSaid}
        />
      ) : contact.isError ? (
        <p role="alert">The contact could not be loaded: {contact.error.message}</p>
      ) : (
        <p class="muted">Loading contact…</p>
      )}
      <OtherConversations contactId={props.contactId} currentId={props.conversationId} />
    </section>
  );
}

function ContactForm(props: { contact: Contact; said: Said; onSaid: (said: Said) => void }) {
  const { contact, said: message, onSaid: setMessage } = props;
  const [name, setName] = useState(contact.name ?? '');
  const [email, setEmail] = useState(contact.email ?? '');
  const [tags, setTags] = useState(contact.tags.join(', '));
  const [stage, setStage] = useState<Stage>(contact.lifecycle_stage ?? '');
  const [fields, setFields] = useState<Field[]>(
    Object.entries(contact.custom_fields).map(([key, value]) => ({ key, value: String(value) })),
  );
  const [saving, setSaving] = useState(false);

  const save = async (event: Event) => {
    event.preventDefault();
    setSaving(true);
    setMessage(null);
    try {
      await saveContact(contact, { name, email, tags, stage, customFields: fields });
      await queryClient.invalidateQueries({ queryKey: keys.contact(contact.id) });
      void queryClient.invalidateQueries({ queryKey: keys.lists() });
      setMessage({ error: false, text: 'Saved.' });
    } catch (err) {
      setMessage({ error: true, text: err instanceof Error ? err.message : 'Not saved.' });
    } finally {
      setSaving(false);
    }
  };

  const shown = displayName(contact);
  return (
    <form class="contact-form" onSubmit={(e) => void save(e)}>
      <div class="contact-head">
        <Avatar name={shown} size="lg" />
        <div>
          <h2>{shown}</h2>
          {contact.phone && <p class="muted">{contact.phone}</p>}
          {contact.identities
            .filter((i) => i.id !== contact.phone)
            .map((i) => (
              <p class="muted small" key={i.channel}>
                {channelName(i.channel)}: {i.id}
              </p>
            ))}
        </div>
      </div>
      <label class="field">
        <span>Name</span>
        <input value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label class="field">
        <span>Email</span>
        <input type="email" value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
      </label>
      <label class="field">
        <span>Tags</span>
        <input
          value={tags}
          aria-describedby={`tags-hint-${contact.id}`}
          onInput={(e) => setTags(e.currentTarget.value)}
        />
        <small class="hint" id={`tags-hint-${contact.id}`}>
          Separated by commas.
        </small>
      </label>
      <label class="field">
        <span>Lifecycle stage</span>
        <select value={stage} onChange={(e) => setStage(e.currentTarget.value as Stage)}>
          <option value="">None</option>
          {STAGES.map((s) => (
            <option key={s.value} value={s.value}>
              {s.label}
            </option>
          ))}
        </select>
      </label>
      <fieldset class="custom-fields">
        <legend>Custom fields</legend>
        {fields.map((f, i) => (
          <div class="custom-field" key={i}>
            <input
              aria-label={`Field ${i + 1} name`}
              placeholder="name"
              value={f.key}
              onInput={(e) => {
                const next = [...fields];
                next[i] = { ...f, key: e.currentTarget.value };
                setFields(next);
              }}
            />
            <input
              aria-label={`Field ${i + 1} value`}
              placeholder="value"
              value={f.value}
              onInput={(e) => {
                const next = [...fields];
                next[i] = { ...f, value: e.currentTarget.value };
                setFields(next);
              }}
            />
            <button
              type="button"
              class="icon-button"
              aria-label={`Remove field ${f.key || i + 1}`}
              onClick={() => setFields(fields.filter((_, j) => j !== i))}
            >
              ×
            </button>
          </div>
        ))}
        <button
          type="button"
          class="link-button"
          onClick={() => setFields([...fields, { key: '', value: '' }])}
        >
          Add field
        </button>
      </fieldset>
      <div class="form-actions">
        <button type="submit" class="button" disabled={saving}>
          Save contact
        </button>
        <span role="status" class={message?.error ? 'error-text' : 'muted'}>
          {message?.text}
        </span>
      </div>
    </form>
  );
}

function OtherConversations(props: { contactId: string; currentId: string }) {
  const list = useQuery<Conversation[]>({
    queryKey: keys.contactConversations(props.contactId),
    queryFn: async ({ signal }) =>
      (
        await data(
          api.GET('/v1/conversations', {
            params: { query: { contact_id: props.contactId, status: 'all', limit: 20 } },
            signal,
          }),
        )
      ).data,
  });
  const others = (list.data ?? []).filter((c) => c.id !== props.currentId);
  return (
    <div class="other-conversations">
      <h3>Other conversations</h3>
      {others.length === 0 ? (
        <p class="muted small">None.</p>
      ) : (
        <ul>
          {others.map((c) => (
            <li key={c.id}>
              <a
                href={`/app/conversations/${c.id}`}
                onClick={onLinkClick(`/conversations/${c.id}`)}
              >
                {channelName(c.channel)} · {c.status === 'open' ? 'Open' : 'Resolved'}
                {c.last_message && ` · ${shortTime(c.last_message.created_at)}`}
              </a>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
