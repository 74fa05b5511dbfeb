// Preact bindings for TanStack Query's core: every piece of server data lives in one
// QueryClient, keyed by resource; components observe it, the live stream updates it.
import {
  hashKey,
  InfiniteQueryObserver,
  notifyManager,
  QueryClient,
  QueryObserver,
  type DefaultError,
  type InfiniteData,
  type InfiniteQueryObserverOptions,
  type InfiniteQueryObserverResult,
  type QueryKey,
  type QueryObserverOptions,
  type QueryObserverResult,
} from '@tanstack/query-core';
import { createContext } from 'preact';
import { useContext, useEffect, useReducer, useState } from 'preact/hooks';

export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 30_000,
      // Live updates come from the event stream, not from polling or refocusing.
      refetchOnWindowFocus: false,
      retry: (count, error) => count < 2 && !(error as { status?: number }).status,
    },
  },
});

export const QueryContext = createContext(queryClient);

function useForceUpdate(): () => void {
  const [, force] = useReducer((n: number) => n + 1, 0);
  return force as () => void;
}

export function useQuery<T>(
  options: QueryObserverOptions<T, DefaultError, T, T, QueryKey>,
): QueryObserverResult<T> {
  const client = useContext(QueryContext);
  const defaulted = client.defaultQueryOptions(options);
  const [observer] = useState(
    () => new QueryObserver<T, DefaultError, T, T, QueryKey>(client, defaulted),
  );
  const force = useForceUpdate();
  const key = hashKey(options.queryKey);
  useEffect(() => observer.subscribe(notifyManager.batchCalls(force)), [observer]);
  useEffect(() => {
    observer.setOptions(defaulted);
  }, [observer, key, options.enabled]);
  return observer.getOptimisticResult(defaulted);
}

export function useInfiniteQuery<T, P>(
  options: InfiniteQueryObserverOptions<T, DefaultError, InfiniteData<T, P>, QueryKey, P>,
): InfiniteQueryObserverResult<InfiniteData<T, P>> {
  const client = useContext(QueryContext);
  const defaulted = client.defaultQueryOptions(options) as typeof options;
  const [observer] = useState(
    () =>
      new InfiniteQueryObserver<T, DefaultError, InfiniteData<T, P>, QueryKey, P>(
        client,
        defaulted,
      ),
  );
  const force = useForceUpdate();
  const key = hashKey(options.queryKey);
  useEffect(() => observer.subscribe(notifyManager.batchCalls(force)), [observer]);
  useEffect(() => {
    observer.setOptions(defaulted);
  }, [observer, key]);
  return observer.getOptimisticResult(defaulted as never);
}

/** Runs a write, and whatever it invalidates after it succeeded. */
export function useAction<A extends unknown[], R>(
  run: (...args: A) => Promise<R>,
): { run: (...args: A) => Promise<R | undefined>; pending: boolean; error: Error | null } {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  return {
    pending,
    error,
    run: async (...args: A) => {
      setPending(true);
      setError(null);
      try {
        return await run(...args);
      } catch (err) {
        setError(err as Error);
        return undefined;
      } finally {
        setPending(false);
      }
    },
  };
}
