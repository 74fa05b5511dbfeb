/** "Page 2 of 7" with Previous / Next, for a `{ data, total, page }` collection. */
export function Pager(props: {
  label: string;
  page: number;
  total: number;
  pageSize: number;
  onPage: (page: number) => void;
}) {
  const pages = Math.max(1, Math.ceil(props.total / props.pageSize));
  if (pages <= 1) return null;
  return (
    <nav class="bc-pager" aria-label={props.label}>
      <button
        type="button"
        class="button small"
        disabled={props.page <= 1}
        onClick={() => props.onPage(props.page - 1)}
      >
        Previous
      </button>
      <span class="muted">
        Page {props.page} of {pages}
      </span>
      <button
        type="button"
        class="button small"
        disabled={props.page >= pages}
        onClick={() => props.onPage(props.page + 1)}
      >
        Next
      </button>
    </nav>
  );
}
