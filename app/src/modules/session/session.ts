// The signed-in user: read once at start (GET /v1/session), set by sign-in and invite
// acceptance, cleared by sign-out or by any request that finds the session gone.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, data, setCsrfToken, whenSignedOut } from '../../api/client.js';
import type { Session } from '../../api/types.js';
import { queryClient } from '../../lib/query.js';

type State =
  { status: 'loading' } | { status: 'signed-out' } | { status: 'signed-in'; session: Session };

let state: State = { status: 'loading' };
const listeners = new Set<(s: State) => void>();

function set(next: State): void {
  state = next;
  setCsrfToken(next.status === 'signed-in' ? next.session.csrf_token : null);
  if (next.status !== 'signed-in') queryClient.clear();
  for (const l of listeners) l(next);
}

whenSignedOut(() => {
  if (state.status === 'signed-in') set({ status: 'signed-out' });
});

export async function loadSession(): Promise<void> {
  try {
    set({ status: 'signed-in', session: await data(api.GET('/v1/session')) });
  } catch {
    set({ status: 'signed-out' });
  }
}

export function signedIn(session: Session): void {
  set({ status: 'signed-in', session });
}

export async function signIn(input: {
  email: string;
  password: string;
  account_id?: string;
}): Promise<void> {
  signedIn(await data(api.POST('/v1/session', { body: input })));
}

export async function signOut(): Promise<void> {
  try {
    await api.DELETE('/v1/session');
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
  }
  set({ status: 'signed-out' });
}

export async function acceptInvite(input: {
  token: string;
  password: string;
  name?: string;
  email?: string;
}): Promise<void> {
  signedIn(await data(api.POST('/v1/invites/accept', { body: input })));
}

export function useSession(): State {
  const [current, setCurrent] = useState(state);
  useEffect(() => {
    listeners.add(setCurrent);
    setCurrent(state);
    return () => void listeners.delete(setCurrent);
  }, []);
  return current;
}

/** The signed-in session (components under the signed-in shell only). */
export function currentSession(): Session {
  if (state.status !== 'signed-in') throw new Error('not signed in');
  return state.session;
}
