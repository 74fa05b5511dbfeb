/** `term` with LIKE's own `%`, `_` and `\` taken literally. */
function literal(term: string): string {
  return term.replace(/[\\%_]/g, '\\$&');
}

/** A LIKE pattern that matches `term` anywhere. */
export function containsPattern(term: string): string {
  return `%${literal(term)}%`;
}

/** A LIKE pattern that matches text starting with `term`. */
export function prefixPattern(term: string): string {
  return `${literal(term)}%`;
}
