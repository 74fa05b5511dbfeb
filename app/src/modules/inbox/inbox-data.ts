import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Conversation, Counts, Status, View } from '../../api/types.js';
import { useInfiniteQuery, useQuery } from '../../lib/query.js';

export const PAGE_SIZE = 50;

export interface ConversationPage {
  data: Conversation[];
  total: number;
  page: number;
}

/** The list of a view, newest activity first, by pages as the list scrolls. */
export function useConversationList(view: View, status: Status, q: string) {
  return useInfiniteQuery<ConversationPage, number>({
    queryKey: keys.list(view, status, q),
    initialPageParam: 1,
    getNextPageParam: (last) => (last.page * PAGE_SIZE < last.total ? last.page + 1 : undefined),
    queryFn: ({ pageParam, signal }) =>
      data(
        api.GET('/v1/conversations', {
          params: {
            query: {
              view,
              status,
              sort: 'last_activity',
              page: pageParam,
              limit: PAGE_SIZE,
              // `q` is DESIGN §5's search; the document does not list it yet.
              ...((q ? { q } : {}) as object),
            },
          },
          signal,
        }),
      ),
  });
}

export function useCounts() {
  return useQuery<Counts>({
    queryKey: keys.counts(),
    queryFn: ({ signal }) => data(api.GET('/v1/conversations/counts', { signal })),
  });
}
