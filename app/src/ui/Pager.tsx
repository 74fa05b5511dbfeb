import './ui.css';

/**
 * "Page 2 of 7" with Previous / Next, for a `{ data, total, page }` collection. With `noun`
 * (singular and plural) it also says how many there are ("· 1,204 contacts", "· 1 contact") and
 * shows even a single page.
 */
export function Pager(props: {
  label: string;
  page: number;
  total: number;
  pageSize: number;
  noun?: [one: string, other: string];
  onPage: (page: number) => void;
}) {
  const pages = Math.max(1, Math.ceil(props.total / props.pageSize));
  if (pages <= 1 && props.noun === undefined) return null;
  return (
    <nav class="pager" aria-label={props.label}>
      <button
        type="button"
        class="button ghost small"
        disabled={props.page <= 1}
        onClick={() => props.onPage(props.page - 1)}
      >
        Previous
      </button>
      <span role="status" class="muted">
        Page {props.page} of {pages.toLocaleString('en')}
        {props.noun !== undefined &&
          ` · ${props.total.toLocaleString('en')} ${props.noun[props.total === 1 ? 0 : 1]}`}
      </span>
      <button
        type="button"
        class="button ghost small"
        disabled={props.page >= pages}
        onClick={() => props.onPage(props.page + 1)}
      >
        Next
      </button>
    </nav>
  );
}
