import { useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Contact, Conversation } from '../../api/types.js';
import { channelName, displayName, shortTime } from '../../lib/format.js';
import { queryClient, useAction, useQuery } from '../../lib/query.js';
import { navigate, onLinkClick } from '../../lib/router.js';
import { ConfirmDialog } from '../../ui/ConfirmDialog.js';
import { Dialog } from '../../ui/Dialog.js';
import { saveContact, STAGES, type Stage } from '../contacts/contact-edit.js';
import { previewMerge } from './merge-preview.js';

/** A contact's page (`/contacts/{id}`): fields, identities, conversations; edit, delete, merge. */
export function ContactDetail({ id, isAdmin }: { id: string; isAdmin: boolean }) {
  const contact = useQuery<Contact>({
    queryKey: keys.contact(id),
    queryFn: ({ signal }) =>
      data(api.GET('/v1/contacts/{id}', { params: { path: { id } }, signal })),
  });
  const [dialog, setDialog] = useState<'edit' | 'delete' | 'merge' | null>(null);
  if (contact.isError)
    return (
      <div class="contacts-admin">
        <BackLink />
        <p role="alert">The contact could not be loaded: {contact.error.message}</p>
      </div>
    );
  if (!contact.data)
    return (
      <div class="contacts-admin">
        <p class="muted">Loading contact…</p>
      </div>
    );
  const c = contact.data;
  return (
    <div class="contacts-admin">
      <BackLink />
      <div class="contacts-head">
        <h1 id="page-title">{displayName(c)}</h1>
        <div class="contacts-actions">
          <button type="button" class="button" onClick={() => setDialog('edit')}>
            Edit
          </button>
          <button type="button" class="button ghost" onClick={() => setDialog('merge')}>
            Merge…
          </button>
          {isAdmin && (
            <button type="button" class="button ghost" onClick={() => setDialog('delete')}>
              Delete
            </button>
          )}
        </div>
      </div>
      <ContactFields contact={c} />
      <ContactConversations contactId={c.id} />
      {dialog === 'edit' && <EditDialog contact={c} onClose={() => setDialog(null)} />}
      {dialog === 'delete' && <DeleteDialog contact={c} onClose={() => setDialog(null)} />}
      {dialog === 'merge' && <MergeDialog into={c} onClose={() => setDialog(null)} />}
    </div>
  );
}

function BackLink() {
  return (
    <a href="/app/contacts" class="back-link" onClick={onLinkClick('/contacts')}>
      ← All contacts
    </a>
  );
}

function ContactFields({
  contact,
}: {
  contact: Omit<Contact, 'id' | 'created_at' | 'updated_at'>;
}) {
  const fields = Object.entries(contact.custom_fields);
  return (
    <dl class="contact-fields">
      <dt>Phone</dt>
      <dd>{contact.phone ?? '—'}</dd>
      <dt>Name</dt>
      <dd>{contact.name ?? '—'}</dd>
      <dt>Email</dt>
      <dd>{contact.email ?? '—'}</dd>
      <dt>Tags</dt>
      <dd>{contact.tags.length > 0 ? contact.tags.join(', ') : '—'}</dd>
      <dt>Lifecycle stage</dt>
      <dd>{contact.lifecycle_stage ?? '—'}</dd>
      <dt>Identities</dt>
      <dd>
        {contact.identities.length === 0
          ? '—'
          : contact.identities.map((i) => (
              <span class="identity" key={i.channel}>
                {channelName(i.channel)}: {i.id}
              </span>
            ))}
      </dd>
      {fields.map(([key, value]) => [
        <dt key={`k-${key}`}>{key}</dt>,
        <dd key={`v-${key}`}>{String(value)}</dd>,
      ])}
    </dl>
  );
}

function ContactConversations({ contactId }: { contactId: string }) {
  const list = useQuery<Conversation[]>({
    queryKey: keys.contactConversations(contactId),
    queryFn: async ({ signal }) =>
      (
        await data(
          api.GET('/v1/conversations', {
            params: { query: { contact_id: contactId, status: 'all', limit: 20 } },
            signal,
          }),
        )
      ).data,
  });
  return (
    <section class="contact-conversations" aria-labelledby="contact-conversations-title">
      <h2 id="contact-conversations-title">Conversations</h2>
      {list.data && list.data.length === 0 && <p class="muted">No conversation yet.</p>}
      <ul>
        {(list.data ?? []).map((c) => (
          <li key={c.id}>
            <a href={`/app/conversations/${c.id}`} onClick={onLinkClick(`/conversations/${c.id}`)}>
              {channelName(c.channel)} · {c.status}
              {c.last_message ? ` · ${shortTime(c.last_message.created_at)}` : ''}
            </a>
          </li>
        ))}
      </ul>
    </section>
  );
}

function refresh(id: string) {
  void queryClient.invalidateQueries({ queryKey: keys.contact(id) });
  void queryClient.invalidateQueries({ queryKey: keys.contactLists() });
}

function EditDialog({ contact, onClose }: { contact: Contact; onClose: () => void }) {
  const [phone, setPhone] = useState(contact.phone ?? '');
  const [name, setName] = useState(contact.name ?? '');
  const [email, setEmail] = useState(contact.email ?? '');
  const [tags, setTags] = useState(contact.tags.join(', '));
  const [stage, setStage] = useState<Stage>(contact.lifecycle_stage ?? '');
  const save = useAction(async () => {
    await saveContact(contact, { phone, name, email, tags, stage });
    refresh(contact.id);
    onClose();
  });
  return (
    <Dialog title="Edit contact" onClose={onClose}>
      <form
        class="dialog-body"
        onSubmit={(e) => {
          e.preventDefault();
          void save.run();
        }}
      >
        <label class="field">
          <span>Phone</span>
          <input value={phone} onInput={(e) => setPhone(e.currentTarget.value)} />
        </label>
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
          <input value={tags} onInput={(e) => setTags(e.currentTarget.value)} />
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
        {save.error && <p role="alert">{save.error.message}</p>}
        <div class="form-actions">
          <button type="submit" class="button primary" disabled={save.pending}>
            Save
          </button>
          <button type="button" class="button ghost" onClick={onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteDialog({ contact, onClose }: { contact: Contact; onClose: () => void }) {
  const remove = async () => {
    await data(api.DELETE('/v1/contacts/{id}', { params: { path: { id: contact.id } } }));
    queryClient.removeQueries({ queryKey: keys.contact(contact.id) });
    void queryClient.invalidateQueries({ queryKey: keys.contactLists() });
    navigate('/contacts');
  };
  return (
    <ConfirmDialog
      title="Delete contact"
      action="Delete contact"
      onConfirm={remove}
      onClose={onClose}
    >
      <p>
        Delete {displayName(contact)} for good? Their conversations and messages stay; the contact
        cannot be brought back.
      </p>
    </ConfirmDialog>
  );
}

/** Pick another contact, see what the merge makes, then merge it into this one. */
function MergeDialog({ into, onClose }: { into: Contact; onClose: () => void }) {
  const [search, setSearch] = useState('');
  const [other, setOther] = useState<Contact | null>(null);
  const found = useQuery({
    queryKey: keys.contactList({ search, limit: 10, merge: into.id }),
    queryFn: ({ signal }) =>
      data(api.GET('/v1/contacts', { params: { query: { search, limit: 10 } }, signal })),
    enabled: search.trim().length > 0,
  });
  const preview = other ? previewMerge(into, other) : null;
  const merge = useAction(async () => {
    await data(
      api.POST('/v1/contacts/{id}/merge', {
        params: { path: { id: into.id } },
        body: { contact_id: other!.id },
      }),
    );
    queryClient.removeQueries({ queryKey: keys.contact(other!.id) });
    refresh(into.id);
    void queryClient.invalidateQueries({ queryKey: keys.contactConversations(into.id) });
    onClose();
  });
  return (
    <Dialog title={`Merge into ${displayName(into)}`} onClose={onClose} wide>
      <div class="dialog-body">
        <p class="muted">
          The other contact's identities, conversations and tags move here; its custom fields fill
          the ones this contact lacks; a missing phone, name or email is taken from it. Then it is
          deleted.
        </p>
        <input
          type="search"
          aria-label="Find the contact to merge"
          placeholder="Name or phone"
          value={search}
          onInput={(e) => setSearch(e.currentTarget.value)}
        />
        <ul class="merge-candidates" aria-label="Contacts found">
          {(found.data?.data ?? [])
            .filter((c) => c.id !== into.id)
            .map((c) => (
              <li key={c.id}>
                <button
                  type="button"
                  class="button ghost small"
                  aria-pressed={other?.id === c.id}
                  onClick={() => setOther(c)}
                >
                  {displayName(c)}
                  {c.phone ? ` · ${c.phone}` : ''}
                </button>
              </li>
            ))}
        </ul>
        {preview && !preview.ok && <p role="alert">{preview.reason}</p>}
        {preview && preview.ok && (
          <section aria-labelledby="merge-preview-title" class="merge-preview">
            <h3 id="merge-preview-title">After the merge</h3>
            <ContactFields contact={preview.result} />
          </section>
        )}
        {merge.error && <p role="alert">{merge.error.message}</p>}
        <div class="form-actions">
          <button
            type="button"
            class="button primary"
            disabled={!preview?.ok || merge.pending}
            onClick={() => void merge.run()}
          >
            Merge
          </button>
          <button type="button" class="button ghost" onClick={onClose}>
            Cancel
          </button>
        </div>
      </div>
    </Dialog>
  );
}
