import './broadcasts.css';
import { useState } from 'preact/hooks';
import { keys } from '../../api/keys.js';
import { useQuery } from '../../lib/query.js';
import { onLinkClick } from '../../lib/router.js';
import { currentSession } from '../session/session.js';
import {
  audienceLabel,
  fetchBroadcasts,
  PAGE_SIZE,
  statusLabel,
  type Broadcast,
  type Paged,
} from './broadcasts-data.js';
import { fullTime } from '../../lib/format.js';
import { Pager } from '../../ui/Pager.js';

/** The account's broadcasts, newest first, with their status and counts. */
export function BroadcastList() {
  const isAdmin = currentSession().user.role === 'admin';
  const [page, setPage] = useState(1);
  const list = useQuery<Paged<Broadcast>>({
    queryKey: keys.broadcastList(page),
    queryFn: ({ signal }) => fetchBroadcasts(page, signal),
  });
  return (
    <div class="bc-page">
      <header class="bc-head">
        <h1 id="page-title">Broadcasts</h1>
        {isAdmin && (
          <a
            class="button primary"
            href="/app/broadcasts/new"
            onClick={onLinkClick('/broadcasts/new')}
          >
            New broadcast
          </a>
        )}
      </header>
      {list.isPending ? (
        <p class="muted">Loading broadcasts…</p>
      ) : list.error ? (
        <p role="alert" class="alert">
          {list.error.message}
        </p>
      ) : list.data.total === 0 ? (
        <p class="muted">
          No broadcast yet.{' '}
          {isAdmin
            ? 'A broadcast sends one message to the contacts you choose, now or later.'
            : 'An admin creates them.'}
        </p>
      ) : (
        <>
          <div class="bc-table-wrap">
            <table class="bc-table" aria-label="Broadcasts">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Status</th>
                  <th scope="col">Channel</th>
                  <th scope="col">Audience</th>
                  <th scope="col" class="num">
                    Sent
                  </th>
                  <th scope="col" class="num">
                    Delivered
                  </th>
                  <th scope="col" class="num">
                    Read
                  </th>
                  <th scope="col" class="num">
                    Replied
                  </th>
                  <th scope="col" class="num">
                    Failed
                  </th>
                  <th scope="col">When</th>
                </tr>
              </thead>
              <tbody>
                {list.data.data.map((b) => (
                  <tr key={b.id}>
                    <td>
                      <a
                        href={`/app/broadcasts/${b.id}`}
                        onClick={onLinkClick(`/broadcasts/${b.id}`)}
                      >
                        {b.name}
                      </a>
                    </td>
                    <td>
                      <span class={`bc-status ${b.status}`}>{statusLabel(b.status)}</span>
                    </td>
                    <td>{b.channel}</td>
                    <td>{audienceLabel(b.audience)}</td>
                    <td class="num">{b.stats.sent}</td>
                    <td class="num">{b.stats.delivered}</td>
                    <td class="num">{b.stats.read}</td>
                    <td class="num">{b.stats.replied}</td>
                    <td class="num">{b.stats.failed}</td>
                    <td>
                      {b.status === 'scheduled' && b.scheduled_at
                        ? `Scheduled ${fullTime(b.scheduled_at)}`
                        : fullTime(b.created_at)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager
            label="Broadcast pages"
            page={page}
            total={list.data.total}
            pageSize={PAGE_SIZE}
            onPage={setPage}
          />
        </>
      )}
    </div>
  );
}
