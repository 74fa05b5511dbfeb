// The app's few routes, in the address bar under /app, so that every screen has a link.
import { useEffect, useState } from 'preact/hooks';

/** An area of the admin screens, with the rest of its path (`/contacts/con_…` → `['con_…']`). */
export type AreaName = 'contacts' | 'broadcasts' | 'settings' | 'getting-started';

export type Route =
  | { name: 'inbox'; conversationId: string | null }
  | { name: AreaName; rest: string[] }
  | { name: 'sign-in' | 'setup' | 'invite' };

export const BASE = '/app';

export function parseRoute(pathname: string): Route {
  const parts = pathname
    .replace(/^\/app\/?/, '')
    .split('/')
    .filter(Boolean);
  switch (parts[0]) {
    case undefined:
    case 'inbox':
      return { name: 'inbox', conversationId: null };
    case 'conversations':
      return { name: 'inbox', conversationId: parts[1] ?? null };
    case 'contacts':
    case 'broadcasts':
    case 'settings':
    case 'getting-started':
      return { name: parts[0], rest: parts.slice(1) };
    case 'sign-in':
    case 'setup':
    case 'invite':
      return { name: parts[0] };
    default:
      return { name: 'inbox', conversationId: null };
  }
}

const listeners = new Set<() => void>();

/** Goes to a path of the app (`/conversations/conv_…`) without reloading. */
export function navigate(path: string, opts: { replace?: boolean } = {}): void {
  const url = `${BASE}${path}`;
  if (url !== location.pathname + location.search) {
    if (opts.replace) history.replaceState(null, '', url);
    else history.pushState(null, '', url);
  }
  for (const l of listeners) l();
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.pathname));
    listeners.add(update);
    addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      removeEventListener('popstate', update);
    };
  }, []);
  return route;
}

/** A link inside the app: a real href (open in a new tab works), handled without a reload. */
export function onLinkClick(path: string) {
  return (event: MouseEvent) => {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(path);
  };
}
