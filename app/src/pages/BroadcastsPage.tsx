import { BroadcastDetail } from '../modules/broadcasts/BroadcastDetail.js';
import { BroadcastList } from '../modules/broadcasts/BroadcastList.js';
import { NewBroadcast } from '../modules/broadcasts/NewBroadcast.js';

/** Broadcasts: the list (`/broadcasts`), a new one (`/broadcasts/new`), one (`/broadcasts/{id}`). */
export function BroadcastsPage({ rest }: { rest: string[] }) {
  if (rest[0] === 'new') return <NewBroadcast />;
  if (rest[0]) return <BroadcastDetail id={rest[0]} />;
  return <BroadcastList />;
}
