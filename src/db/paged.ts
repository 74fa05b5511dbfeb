import type { SelectQueryBuilder } from 'kysely';
import type { PageRequest } from '../http/pagination.js';

/** One page of a list, and how many rows the whole list has. */
export interface Paged<R> {
  rows: R[];
  total: number;
}

/**
 * One page of a list with its exact total (SPEC.md, pagination): `filtered` is the list's table
 * with the account and the filters applied and nothing selected; `select` picks the columns (and
 * any join they need) and the order. Two statements run side by side, each on its own pooled
 * connection: the page (`limit`/`offset`) and `count(*)` over the same filter, which reads no
 * row's columns and needs no join. (A `count(*) over ()` on the page instead would compute every
 * selected column of every matching row, and a page beyond the last would carry no total.)
 */
export async function paged<DB, TB extends keyof DB, I, DB2, TB2 extends keyof DB2, O>(
  filtered: SelectQueryBuilder<DB, TB, I>,
  page: PageRequest,
  select: (q: SelectQueryBuilder<DB, TB, I>) => SelectQueryBuilder<DB2, TB2, O>,
): Promise<Paged<O>> {
  const [rows, count] = await Promise.all([
    select(filtered)
      .limit(page.limit)
      .offset((page.page - 1) * page.limit)
      .execute(),
    filtered
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .$castTo<{ n: string }>()
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}
