import { useEffect, useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Channel, Contact } from '../../api/types.js';
import { channelName, displayName, shortTime } from '../../lib/format.js';
import { useQuery } from '../../lib/query.js';
import { onLinkClick } from '../../lib/router.js';
import { Pager } from '../../ui/Pager.js';
import { STAGES, type Stage } from '../contacts/contact-edit.js';

export interface ContactFilters {
  search: string;
  tag: string;
  lifecycle_stage: Stage;
  channel: '' | Channel;
}

const PAGE_SIZE = 50;
const CHANNELS: Channel[] = ['whatsapp', 'messenger', 'instagram', 'webchat'];

/** The filters as the list and the export take them (empty ones left out). */
export function filterQuery(f: ContactFilters) {
  return {
    ...(f.search.trim() ? { search: f.search.trim() } : {}),
    ...(f.tag ? { tag: f.tag } : {}),
    ...(f.lifecycle_stage ? { lifecycle_stage: f.lifecycle_stage } : {}),
    ...(f.channel ? { channel: f.channel } : {}),
  };
}

/** The export of the filtered contacts: a plain link, downloaded by the browser as it streams. */
export function exportHref(f: ContactFilters): string {
  const query = new URLSearchParams(filterQuery(f)).toString();
  return `/v1/contacts/export${query ? `?${query}` : ''}`;
}

/** The contacts, searched and filtered, a page at a time (Previous / Next) however many. */
export function ContactsTable(props: { isAdmin: boolean }) {
  const [filters, setFilters] = useState<ContactFilters>({
    search: '',
    tag: '',
    lifecycle_stage: '',
    channel: '',
  });
  const [typed, setTyped] = useState('');
  const [page, setPage] = useState(1);
  // The search runs once typing pauses.
  useEffect(() => {
    const timer = setTimeout(() => setFilters((f) => ({ ...f, search: typed })), 250);
    return () => clearTimeout(timer);
  }, [typed]);
  useEffect(() => setPage(1), [filters]);

  const query = filterQuery(filters);
  const list = useQuery({
    queryKey: keys.contactList({ ...query, page }),
    queryFn: ({ signal }) =>
      data(
        api.GET('/v1/contacts', {
          params: { query: { ...query, page, limit: PAGE_SIZE } },
          signal,
        }),
      ),
    placeholderData: (previous) => previous,
  });
  const tags = useQuery({
    queryKey: keys.tags(),
    queryFn: ({ signal }) =>
      data(api.GET('/v1/tags', { params: { query: { limit: 100 } }, signal })),
  });
  const total = list.data?.total ?? 0;
  const set = (change: Partial<ContactFilters>) => setFilters((f) => ({ ...f, ...change }));

  return (
    <div class="contacts-admin">
      <div class="contacts-head">
        <h1 id="page-title">Contacts</h1>
        <div class="contacts-actions">
          <a class="button ghost" href={exportHref(filters)} download="contacts.csv">
            Export CSV
          </a>
          {props.isAdmin && (
            <a class="button" href="/app/contacts/import" onClick={onLinkClick('/contacts/import')}>
              Import CSV
            </a>
          )}
        </div>
      </div>
      <div class="contacts-filters" role="search" aria-label="Contacts">
        <input
          type="search"
          aria-label="Search contacts"
          placeholder="Search by name or phone"
          value={typed}
          onInput={(e) => setTyped(e.currentTarget.value)}
        />
        <label>
          <span>Tag</span>
          <select value={filters.tag} onChange={(e) => set({ tag: e.currentTarget.value })}>
            <option value="">Any tag</option>
            {(tags.data?.data ?? []).map((t) => (
              <option key={t.name} value={t.name}>
                {t.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          <span>Lifecycle stage</span>
          <select
            value={filters.lifecycle_stage}
            onChange={(e) =>
              set({ lifecycle_stage: e.currentTarget.value as ContactFilters['lifecycle_stage'] })
            }
          >
            <option value="">Any stage</option>
            {STAGES.map((s) => (
              <option key={s.value} value={s.value}>
                {s.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          <span>Channel</span>
          <select
            value={filters.channel}
            onChange={(e) => set({ channel: e.currentTarget.value as ContactFilters['channel'] })}
          >
            <option value="">Any channel</option>
            {CHANNELS.map((c) => (
              <option key={c} value={c}>
                {channelName(c)}
              </option>
            ))}
          </select>
        </label>
      </div>
      {list.isError && <p role="alert">The contacts could not be loaded: {list.error.message}</p>}
      <table class="contacts-table" aria-label="Contacts" aria-busy={list.isFetching}>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Phone</th>
            <th scope="col">Email</th>
            <th scope="col">Tags</th>
            <th scope="col">Stage</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {(list.data?.data ?? []).map((c: Contact) => (
            <tr key={c.id}>
              <td>
                <a href={`/app/contacts/${c.id}`} onClick={onLinkClick(`/contacts/${c.id}`)}>
                  {displayName(c)}
                </a>
              </td>
              <td>{c.phone ?? ''}</td>
              <td>{c.email ?? ''}</td>
              <td>{c.tags.join(', ')}</td>
              <td>{c.lifecycle_stage ?? ''}</td>
              <td>{shortTime(c.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data && list.data.data.length === 0 && <p class="muted">No contact matches.</p>}
      <Pager
        label="Pages"
        page={page}
        total={total}
        pageSize={PAGE_SIZE}
        noun={['contact', 'contacts']}
        onPage={setPage}
      />
    </div>
  );
}
